//! `lock run --min-interval`: at most one run per interval, by the
//! database server's clock, recorded before COMMAND starts.

use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use pgcoord_testkit::pg::{StopMode, TestDatabase};
use tokio::process::Command;

use crate::common::*;

async fn install(db: &TestDatabase) {
    let out = output(eventsource(Some(db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
}

/// `lock run --min-interval INTERVAL FLAGS KEY -- sh -c SCRIPT`.
fn once(db: &TestDatabase, interval: &str, flags: &[&str], key: &str, script: &str) -> Command {
    let mut cmd = eventsource(Some(db));
    cmd.args(["lock", "run", "--min-interval", interval])
        .args(flags)
        .args([key, "--", "sh", "-c", script]);
    cmd
}

/// The recorded start of `key`'s last run.
async fn last_started(client: &tokio_postgres::Client, key: &str) -> Option<DateTime<Utc>> {
    client
        .query_one(
            "SELECT last_run_started FROM eventsource_lock_fences \
             WHERE lock_id = eventsource_lock_id($1)",
            &[&key],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn several_runs_started_at_once_get_exactly_one_run() {
    let db = database().await;
    install(&db).await;
    let dir = scratch_dir();
    let cases: [&[&str]; 6] = [
        &["--no-wait"],
        &["--timeout", "60s"],
        &["--no-wait", "--fence"],
        &["--timeout", "60s", "--lease", "5s"],
        &["--no-wait", "--permits", "3"],
        &["--timeout", "60s", "--also", "partner"],
    ];
    for (n, flags) in cases.iter().enumerate() {
        let key = format!("nightly-{n}");
        let file = dir.join(&format!("runs-{n}"));
        let script = format!("echo ran >> '{}'", file.display());
        let runs: Vec<_> = (0..4)
            .map(|_| {
                once(&db, "1h", flags, &key, &script)
                    .spawn()
                    .expect("starts")
            })
            .collect();
        let mut codes = Vec::new();
        for run in runs {
            let out = tokio::time::timeout(BOUND, run.wait_with_output())
                .await
                .expect("finishes")
                .unwrap();
            let code = exit_code(out.status);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(code == 0 || code == 75, "{flags:?}: {code} {stderr}");
            if code == 75 {
                let said = stderr.contains("skipped") || stderr.contains("not acquired");
                assert!(said, "{flags:?}: {stderr}");
            }
            codes.push(code);
        }
        let ran = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(ran, "ran\n", "{flags:?}: exactly one run ({codes:?})");
        assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{flags:?}");
    }
}

#[tokio::test]
async fn a_run_within_the_interval_is_skipped_with_75_and_says_when_the_next_may() {
    let db = database().await;
    install(&db).await;
    let first = output(&mut once(
        &db,
        "1h",
        &[],
        "report",
        "echo \"$EVENTSOURCE_RUN_STARTED\"",
    ))
    .await;
    assert_eq!(first.code, 0, "{first:?}");
    let started = first.stdout.trim().to_owned();
    let recorded = last_started(&db.connect().await.unwrap(), "report")
        .await
        .unwrap();
    assert_eq!(
        started,
        recorded.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    );

    let second = output(&mut once(&db, "1h", &[], "report", "echo ran")).await;
    assert_eq!(second.code, 75, "{second:?}");
    assert_eq!(second.stdout, "", "the command must not run");
    let next = (recorded + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert!(
        second.stderr.contains("skipped")
            && second
                .stderr
                .contains(&format!("last run started at {started}"))
            && second
                .stderr
                .contains(&format!("next run may start at {next}")),
        "{}",
        second.stderr
    );
    // --conflict-exit-code applies to a skipped run too.
    let third = output(&mut once(
        &db,
        "1h",
        &["--conflict-exit-code", "0"],
        "report",
        "echo ran",
    ))
    .await;
    assert_eq!((third.code, third.stdout.as_str()), (0, ""), "{third:?}");
}

#[tokio::test]
async fn after_the_interval_by_the_servers_clock_it_runs_again() {
    let db = database().await;
    install(&db).await;
    let client = db.connect().await.unwrap();
    let first = output(&mut once(&db, "1s", &[], "tick", "echo ran")).await;
    assert_eq!(first.code, 0, "{first:?}");
    let t1 = last_started(&client, "tick").await.unwrap();
    // No event says "a second has passed on the server": poll its clock.
    until_async("the interval to pass by the server's clock", || async {
        client
            .query_one(
                "SELECT clock_timestamp() >= $1::timestamptz + interval '1s'",
                &[&t1],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    })
    .await;
    let second = output(&mut once(&db, "1s", &[], "tick", "echo ran")).await;
    assert_eq!(
        (second.code, second.stdout.as_str()),
        (0, "ran\n"),
        "{second:?}"
    );
    let t2 = last_started(&client, "tick").await.unwrap();
    assert!(t2 >= t1 + chrono::Duration::seconds(1), "{t1} {t2}");
}

/// Polls an async condition, bounded by [`BOUND`].
async fn until_async<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + BOUND;
    while !cond().await {
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_interval_holds_across_a_sigkilled_tool_and_a_server_crash() {
    // The test clusters commit asynchronously (synchronous_commit=off),
    // which a crash may undo: the record must ask for a synchronous commit.
    let (cluster, db) = private_db(&[]).await;
    install(&db).await;
    let mut run = Running::start(&mut once(
        &db,
        "1h",
        &[],
        "crashy",
        "echo started; exec sleep 1000",
    ));
    run.expect_line("started").await;
    run.signal(Signal::SIGKILL);
    let out = run.finish().await;
    assert_eq!(out.code, 128 + 9, "{out:?}");
    let restarting = cluster.clone();
    tokio::task::spawn_blocking(move || restarting.restart(StopMode::Immediate))
        .await
        .unwrap()
        .expect("restart");

    let again = output(&mut once(
        &db,
        "1h",
        &["--timeout", "60s"],
        "crashy",
        "echo ran",
    ))
    .await;
    assert_eq!(again.code, 75, "{again:?}");
    assert_eq!(again.stdout, "");
    assert!(again.stderr.contains("skipped"), "{}", again.stderr);
}

#[tokio::test]
async fn the_start_is_the_servers_clock_at_the_claim_not_a_transactions_start() {
    let db = database().await;
    install(&db).await;
    let first = output(&mut once(&db, "1ms", &[], "clocked", "true")).await;
    assert_eq!(first.code, 0, "{first:?}");
    // A fenced writer's transaction keeps the key's row locked FOR SHARE:
    // the next claim waits for it inside its transaction (first to read
    // the start it replaces), whose now() is from before the wait.
    let mut writer = session(&db, "writer").await;
    let tx = writer.transaction().await.unwrap();
    tx.execute(
        "SELECT fence FROM eventsource_lock_fences WHERE lock_id = eventsource_lock_id('clocked') \
         FOR SHARE",
        &[],
    )
    .await
    .unwrap();
    let run = Running::start(&mut once(
        &db,
        "1ms",
        &[],
        "clocked",
        "echo \"$EVENTSOURCE_RUN_STARTED\"",
    ));
    let watcher = db.connect().await.unwrap();
    until_async("the claim waiting on the row lock", || async {
        watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgcoord-cli' \
                 AND wait_event_type = 'Lock' AND (query LIKE '%eventsource_lock_claim_run%' \
                 OR query LIKE '%last_run_started%FOR NO KEY UPDATE%')",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    })
    .await;
    let seen_waiting: DateTime<Utc> = watcher
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .unwrap()
        .get(0);
    tx.commit().await.unwrap();
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    let recorded = last_started(&watcher, "clocked").await.unwrap();
    assert!(
        recorded > seen_waiting,
        "the start must be the server's clock when the claim ran ({recorded}), not the \
         start of its statement or transaction (before {seen_waiting})"
    );
}

#[tokio::test]
async fn before_install_and_on_an_older_install_it_says_to_run_lock_install() {
    let db = database().await;
    let out = output(&mut once(&db, "1h", &[], "early", "echo ran")).await;
    assert_eq!((out.code, out.stdout.as_str()), (78, ""), "{out:?}");
    assert!(
        out.stderr.contains("eventsource lock install"),
        "{}",
        out.stderr
    );

    // The table as an older version created it: no run log, fence > 0.
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(
            "CREATE TABLE eventsource_lock_fences (lock_id bigint PRIMARY KEY, key text NOT NULL, \
             fence bigint NOT NULL CHECK (fence > 0))",
        )
        .await
        .unwrap();
    let out = output(&mut once(&db, "1h", &[], "early", "echo ran")).await;
    assert_eq!((out.code, out.stdout.as_str()), (78, ""), "{out:?}");
    assert!(out.stderr.contains("older version"), "{}", out.stderr);

    install(&db).await;
    install(&db).await;
    let out = output(&mut once(&db, "1h", &[], "early", "echo ran")).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "ran\n"), "{out:?}");
    // A row made by a run record hands out no token: the first fenced
    // holder of the key still gets the first token (of timeline 1).
    let mut fenced = eventsource(Some(&db));
    fenced
        .args(["lock", "run", "--fence", "early", "--", "sh", "-c"])
        .arg("echo \"$EVENTSOURCE_LOCK_FENCE\"");
    let out = output(&mut fenced).await;
    let first = (1u64 << pgcoord::postgres::fencing::EPOCH_SHIFT) + 1;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, format!("{first}\n").as_str()),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_zero_interval_and_shared_mode_are_usage_errors() {
    for flags in [
        &["lock", "run", "--min-interval", "0s", "k", "--", "true"][..],
        &[
            "lock",
            "run",
            "--min-interval",
            "1h",
            "--shared",
            "k",
            "--",
            "true",
        ][..],
    ] {
        let out = output(eventsource(None).args(flags)).await;
        assert_eq!(out.code, 2, "{flags:?}: {out:?}");
        assert!(out.stderr.contains("--min-interval"), "{}", out.stderr);
    }
}

#[tokio::test]
async fn a_lock_lost_while_the_start_is_recorded_does_not_start_the_command() {
    let db = database().await;
    install(&db).await;
    let first = output(&mut once(&db, "1ms", &[], "lossy", "true")).await;
    assert_eq!(first.code, 0, "{first:?}");
    // Hold the key's row so that the next claim waits, then end the lock's
    // session while it does.
    let mut writer = session(&db, "writer").await;
    let tx = writer.transaction().await.unwrap();
    tx.execute(
        "SELECT fence FROM eventsource_lock_fences WHERE lock_id = eventsource_lock_id('lossy') \
         FOR SHARE",
        &[],
    )
    .await
    .unwrap();
    let mut cmd = once(
        &db,
        "1ms",
        &["--holder-id", "lost-in-claim"],
        "lossy",
        "echo ran",
    );
    cmd.env("EVENTSOURCE_LOG", "pgcoord=debug");
    let mut run = Running::start(&mut cmd);
    let watcher = db.connect().await.unwrap();
    until_async("the claim waiting on the row lock", || async {
        watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgcoord-cli' \
                 AND wait_event_type = 'Lock' AND (query LIKE '%eventsource_lock_claim_run%' \
                 OR query LIKE '%last_run_started%FOR NO KEY UPDATE%')",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    })
    .await;
    terminate_holder(&db, "lost-in-claim").await;
    // The library logs this after the loss signal fired.
    run.expect_stderr("lock session closed").await;
    tx.commit().await.unwrap();
    let out = run.finish().await;
    assert_eq!((out.code, out.stdout.as_str()), (76, ""), "{out:?}");
    assert!(
        out.stderr
            .contains("was lost while this run's start was recorded"),
        "{}",
        out.stderr
    );
}

/// A role allowed one connection holds the lock on it and cannot open the
/// run log's: the line says --min-interval needs a second one.
#[tokio::test]
async fn a_role_allowed_one_connection_is_told_the_run_log_needs_a_second() {
    let db = database().await;
    install(&db).await;
    let role = format!("one_conn_{}", db.name());
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN NOSUPERUSER CONNECTION LIMIT 1; \
             GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO {role}; \
             GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}"
        ))
        .await
        .unwrap();
    let url = format!(
        "postgres://{role}@{}",
        db.url().split_once('@').expect("a URL with a user").1
    );
    let mut cmd = eventsource(None);
    cmd.env("DATABASE_URL", &url).args([
        "lock",
        "run",
        "--min-interval",
        "1h",
        "one-connection",
        "--",
        "true",
    ]);
    let out = output(&mut cmd).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr.contains("too many connections")
            && out.stderr.contains("must leave room for two")
            && out.stderr.contains("the command was not run"),
        "{}",
        out.stderr
    );
}
