//! Exit codes and messages when the server is the problem: a cancelled
//! wait (77), a server that never answers (69, within the timeout), a
//! server down at start (retried while --timeout lasts), a full lock table
//! (the server's message and HINT on one line, no misleading hint of ours).

use std::net::TcpListener;

use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::StopMode;

use crate::common::*;

#[tokio::test]
async fn a_wait_cancelled_by_the_server_exits_77_not_as_a_conflict() {
    let (_cluster, db) = private_db(&[]).await;
    let inspector = db.connect().await.unwrap();
    let holder = session(&db, "someone-else").await;
    holder
        .execute(
            "SELECT pg_advisory_lock($1)",
            &[&lock_id_for_key("cancelled")],
        )
        .await
        .unwrap();
    let run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "cancelled",
        "--",
        "echo",
        "must-not-run",
    ]));
    let lock = wait_for(&inspector, "cancelled", "the tool waiting", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await
    .unwrap();
    let waiter = lock.waiters[0].pid;
    let cancelled: bool = inspector
        .query_one("SELECT pg_cancel_backend($1)", &[&waiter])
        .await
        .unwrap()
        .get(0);
    assert!(cancelled);
    let out = run.finish().await;
    assert_eq!(out.code, 77, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("cancelled by the server"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("not acquired"), "{}", out.stderr);
}

#[tokio::test]
async fn a_server_that_never_answers_exits_69_within_the_timeout() {
    let (port, accepting) = silent_server();
    let out = output(
        eventsource(None)
            .env(
                "DATABASE_URL",
                format!("postgres://u:pw@127.0.0.1:{port}/x"),
            )
            .args(["lock", "run", "--timeout", "2s", "free-key", "--", "true"]),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr.contains("did not answer within 2s"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("held elsewhere"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    drop(accepting);
}

#[tokio::test]
async fn with_a_timeout_a_server_down_at_start_is_retried_until_it_is_up() {
    let (cluster, db) = private_db(&[]).await;
    let stopping = cluster.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Fast))
        .await
        .unwrap()
        .unwrap();
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--timeout",
        "5m",
        "retried",
        "--",
        "echo",
        "ran",
    ]));
    let line = run.expect_stderr("retrying until --timeout runs out").await;
    assert!(line.contains("cannot connect"), "{line}");
    let starting = cluster.clone();
    tokio::task::spawn_blocking(move || starting.start_again())
        .await
        .unwrap()
        .unwrap();
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "ran\n");

    // Without --timeout a server that is down fails at once.
    let stopping = cluster.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Fast))
        .await
        .unwrap()
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "run", "retried", "--", "true"])).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(!out.stderr.contains("retrying"), "{}", out.stderr);
}

#[tokio::test]
async fn a_full_lock_table_is_reported_with_the_servers_hint_on_one_line() {
    // A small lock table: 10 x (20 connections + other backend slots).
    let (_cluster, db) = private_db(&[
        ("max_connections", "20"),
        ("max_locks_per_transaction", "10"),
    ])
    .await;
    let filler = db.connect().await.unwrap();
    let err = filler
        .execute(
            "SELECT pg_advisory_lock(g) FROM generate_series(1::int8, 1000000) g",
            &[],
        )
        .await
        .expect_err("the lock table fills up");
    assert_eq!(err.code().map(|c| c.code()), Some("53200"), "{err}");
    // `lock holders` opens its session itself: the server's HINT follows
    // its message on the same line.
    let out = output(eventsource(Some(&db)).args(["lock", "holders"])).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{:?}", out.stderr);
    assert!(
        out.stderr.contains("out of shared memory")
            && out
                .stderr
                .contains("; HINT: You might need to increase max_locks_per_transaction"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("check the database URL"),
        "{}",
        out.stderr
    );
    // `lock run`: one line, and the advice once, the server's own HINT (the
    // engine's batched session reports a copy of the error whose text lacks
    // it; the tool prints it from the error's `hint()`).
    let out =
        output(eventsource(Some(&db)).args(["lock", "run", "--no-wait", "full", "--", "true"]))
            .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{:?}", out.stderr);
    assert!(
        out.stderr.contains("out of shared memory"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("check the database URL"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("max_locks_per_transaction").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("HINT: You might need to increase max_locks_per_transaction"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_server_down_for_the_whole_timeout_is_reported_with_its_last_failure() {
    // A port with nothing behind it: bind, note, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", format!("postgres://u@127.0.0.1:{port}/x"))
            .args(["lock", "run", "--timeout", "1s", "down-key", "--", "true"]),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert!(
        lines[0].contains("retrying until --timeout runs out"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("--timeout 1s ran out while connecting kept failing")
            && lines[1].contains("the last failure"),
        "{}",
        lines[1]
    );
    assert!(!out.stderr.contains("did not answer"), "{}", out.stderr);
    // A refused connection had nothing to do with the timeout: the lines
    // name --timeout where it matters, not beside the refusal.
    assert!(!out.stderr.contains("(timeout"), "{}", out.stderr);
}

#[tokio::test]
async fn an_inspection_that_reaches_no_host_names_every_host() {
    // Two ports with nothing behind them: bind, note, close.
    let bound: Vec<TcpListener> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<u16> = bound
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    drop(bound);
    let url = format!(
        "postgres://u@127.0.0.1:{},127.0.0.1:{}/x",
        ports[0], ports[1]
    );
    for args in [&["lock", "holders"][..], &["leader", "show", "e"]] {
        let out = output(eventsource(None).env("DATABASE_URL", &url).args(args)).await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        for port in &ports {
            assert!(
                out.stderr.contains(&format!("127.0.0.1:{port}: ")),
                "{args:?} names host {port}: {}",
                out.stderr
            );
        }
    }
}

/// `lock run ARGS behind-a-frozen-host -- echo ran` with a URL whose
/// first host accepts connections and never answers and whose second is
/// the test database; `None` when it is not reached over TCP.
async fn behind_a_frozen_first_host(args: &[&str]) -> Option<Output> {
    let db = database().await;
    let config = db.config();
    let (Some(tokio_postgres::config::Host::Tcp(host)), Some(port)) =
        (config.get_hosts().first(), config.get_ports().first())
    else {
        println!("SKIPPED: the test database is not reached over TCP");
        return None;
    };
    let (frozen, accepting) = silent_server();
    let url = format!(
        "postgres://{}@127.0.0.1:{frozen},{host}:{port}/{}",
        config.get_user().unwrap_or("postgres"),
        db.name()
    );
    let mut cmd = eventsource(Some(&db));
    cmd.env("DATABASE_URL", url);
    if let Some(pw) = config.get_password() {
        cmd.env("PGPASSWORD", String::from_utf8_lossy(pw).as_ref());
    }
    cmd.args(["lock", "run"]).args(args);
    let out = output(cmd.args(["behind-a-frozen-host", "--", "echo", "ran"])).await;
    drop(accepting);
    Some(out)
}

/// `--no-wait` with two hosts, the first frozen (it accepts and never
/// answers, as a SIGSTOPped old primary): the first host takes its whole
/// `connect_timeout` (10 s by default), then the second is asked. The
/// attempt used to be cut at 10 s in all, so the run exited 69 without the
/// second host ever being tried.
#[tokio::test]
async fn no_wait_behind_a_frozen_first_host_runs_on_the_second() {
    let Some(out) = behind_a_frozen_first_host(&["--no-wait"]).await else {
        return;
    };
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), "ran", "{out:?}");
}

/// A `--timeout` shorter than the frozen host's `connect_timeout` (10 s by
/// default) used to be spent on that host alone: exit 69, "did not answer
/// within 8s", the second host never tried (found by a failover probe:
/// a promoted standby listed after a silent old primary). Each host now
/// gets its share of the timeout.
#[tokio::test]
async fn a_timeout_behind_a_frozen_first_host_leaves_time_for_the_second() {
    let Some(out) = behind_a_frozen_first_host(&["--timeout", "8s"]).await else {
        return;
    };
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), "ran", "{out:?}");
}

/// `--timeout` against a silent server, the URL setting `connect_timeout`:
/// each try's connect fails after 2 s and is retried; the last try, begun
/// as the timeout runs out (the pause before it cut short), used to be
/// given the engine's 2 s floor to connect, ending the run 2 s past
/// `--timeout`. A retry now connects within what is left. The timings:
/// tries end at about 2, 4.2, 6.6 and 9.4 s, the next pause (1.6 s) is cut
/// to what is left of 10.2 s, so the last try begins at the deadline.
#[tokio::test]
async fn a_retry_connects_within_what_is_left_of_the_timeout() {
    let (port, accepting) = silent_server();
    let started = std::time::Instant::now();
    let out = output(
        eventsource(None)
            .env(
                "DATABASE_URL",
                format!("postgres://u@127.0.0.1:{port}/x?connect_timeout=2"),
            )
            .args(["lock", "run", "--timeout", "10200ms", "k", "--", "true"]),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(out.code, 69, "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert!(
        lines[0].contains("retrying until --timeout runs out"),
        "{}",
        out.stderr
    );
    assert!(
        lines[1].contains("--timeout 10.2s ran out while connecting kept failing")
            && lines[1].contains("no answer within 2s"),
        "{}",
        out.stderr
    );
    // Before: at least 10.2 s + the whole 2 s floor of the last try.
    assert!(
        took < std::time::Duration::from_millis(10_200 + 2_000),
        "took {took:?}"
    );
    drop(accepting);
}
