//! The live views while the server is frozen (its postmaster and every
//! child SIGSTOPped, as a VM paused or a host swapping hard): a refresh
//! that does not return within its bound (the interval, at least 2s)
//! fails like any other, is said, and the views recover when the server
//! answers again, without leaving sessions behind. The same for the other
//! watches: `leader show --watch` and `projection status --watch`.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord_testkit::pg::TestCluster;

use crate::common::*;
use crate::tmux::{tmux_or_skip, Tmux};
use crate::top::holding;

/// A cluster's processes, stopped until this is dropped.
struct Frozen(Vec<Pid>);

impl Frozen {
    /// Stops the postmaster (first: it starts no child meanwhile), then
    /// each of its children.
    fn freeze(cluster: &TestCluster) -> Self {
        let pidfile = cluster.dir().join("data").join("postmaster.pid");
        let text = std::fs::read_to_string(&pidfile).expect("postmaster.pid");
        let postmaster: i32 = text.lines().next().unwrap().trim().parse().unwrap();
        let mut pids = vec![Pid::from_raw(postmaster)];
        kill(pids[0], Signal::SIGSTOP).expect("stop the postmaster");
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // "pid (comm) STATE PPID ...": the parent follows the state.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()));
            if ppid == Some(postmaster) && kill(Pid::from_raw(pid), Signal::SIGSTOP).is_ok() {
                pids.push(Pid::from_raw(pid));
            }
        }
        Self(pids)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = kill(*pid, Signal::SIGCONT);
        }
    }
}

/// Waits until the database's only client session besides `admin`'s is
/// the view's own (`pgcoord-cli`): the session that did not answer and
/// the connections tried meanwhile have all ended. PostgreSQL has no event
/// for a session's end: polled, bounded.
async fn until_only_the_views_session(admin: &tokio_postgres::Client) {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let apps: Vec<Option<String>> = admin
            .query(
                "SELECT application_name FROM pg_stat_activity \
                 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \
                 AND (datname IS NULL OR datname = current_database())",
                &[],
            )
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.get(0))
            .collect();
        if apps == [Some("pgcoord-cli".to_owned())] {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "sessions left behind: {apps:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn top_says_a_frozen_server_did_not_answer_and_recovers() {
    if !tmux_or_skip("`lock top`") {
        return;
    }
    let (cluster, db) = private_db(&[]).await;
    let mut holder = holding(&db, "frozen-top-holder", "freeze:top").await;
    let tmux = Tmux::start(
        &db,
        &format!("{BIN} lock top --interval 1s; echo \"top exited $?\"; sleep 600"),
    )
    .await;
    tmux.until("the holder", |s| s.contains("frozen-top-holder"))
        .await;

    let frozen = Frozen::freeze(&cluster);
    let screen = tmux
        .until("a refresh that failed", |s| s.contains("refresh failed at"))
        .await;
    let third = screen.lines().nth(2).unwrap_or_default();
    assert!(
        third.contains(", rows as of ") && third.contains("the server did not answer within 2s"),
        "{screen}"
    );
    assert!(
        screen.contains("frozen-top-holder"),
        "the last rows stay: {screen}"
    );
    // The view goes on while the server stays silent: the clock moves.
    let clock = screen.lines().next().unwrap().to_owned();
    tmux.until("the clock moving", |s| {
        s.lines().next().is_some_and(|l| l != clock) && s.contains("refresh failed at")
    })
    .await;

    drop(frozen);
    let _ = holder.child.start_kill();
    let screen = tmux
        .until("a listing again", |s| {
            !s.contains("refresh failed") && !s.contains("frozen-top-holder")
        })
        .await;
    assert!(!screen.contains("top exited"), "{screen}");
    let admin = db.connect().await.unwrap();
    until_only_the_views_session(&admin).await;
}

#[tokio::test]
async fn watch_reports_a_frozen_server_once_and_sees_the_release_after() {
    let (cluster, db) = private_db(&[]).await;
    let mut holder = holding(&db, "frozen-watch-holder", "freeze:watch").await;
    let mut watch = Running::start(eventsource(Some(&db)).args([
        "lock",
        "holders",
        "--watch",
        "--interval",
        "1s",
        "freeze:watch",
    ]));
    let line = watch.next_line().await;
    assert!(line.contains(" held key=freeze:watch "), "{line}");

    let frozen = Frozen::freeze(&cluster);
    let error = watch.expect_stderr("cannot list lock holders").await;
    assert!(
        error.contains("the server did not answer within 2s")
            && error.ends_with("; trying again every 1s"),
        "{error}"
    );
    drop(frozen);
    let _ = holder.child.start_kill();
    watch.expect_stderr("listing lock holders again").await;
    let line = watch.next_line().await;
    assert!(line.contains(" released key=freeze:watch "), "{line}");
    let admin = db.connect().await.unwrap();
    until_only_the_views_session(&admin).await;
    watch.signal(Signal::SIGTERM);
    let out = watch.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stderr.matches("cannot list lock holders").count(),
        1,
        "reported once: {}",
        out.stderr
    );
}

/// Freezes `cluster` under a running `watch` (`--every 1s`): its failure
/// line, starting with `failing`, says the server did not answer within
/// the 2s floor and that it tries again; once thawed, `recovered` comes,
/// `next` (if any) checks the watch's next line, no session is left
/// behind, SIGTERM ends it with 0, and the failure was said once.
async fn rides_out_a_freeze(
    cluster: &pgcoord_testkit::pg::TestCluster,
    db: &pgcoord_testkit::pg::TestDatabase,
    mut watch: Running,
    (failing, recovered): (&str, &str),
    next: Option<fn(&str)>,
) {
    let frozen = Frozen::freeze(cluster);
    let error = watch.expect_stderr(failing).await;
    assert!(
        error.contains("did not answer within 2s") && error.ends_with("; trying again every 1s"),
        "{error}"
    );
    drop(frozen);
    watch.expect_stderr(recovered).await;
    if let Some(check) = next {
        check(&watch.next_line().await);
    }
    let admin = db.connect().await.unwrap();
    until_only_the_views_session(&admin).await;
    watch.signal(Signal::SIGTERM);
    let out = watch.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stderr.matches(failing).count(),
        1,
        "reported once: {}",
        out.stderr
    );
}

#[tokio::test]
async fn leader_show_watch_reports_a_frozen_server_within_its_bound_and_recovers() {
    let (cluster, db) = private_db(&[]).await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let mut watch = Running::start(
        eventsource(Some(&db)).args(["leader", "show", "--watch", "--every", "1s", "frozen"]),
    );
    let line = watch.next_line().await;
    assert!(
        line.ends_with("frozen\tvacant\t-\t-\tlast_term=-"),
        "{line}"
    );
    let recovered = "looking at election \"frozen\" again";
    let lines = ("cannot look at election", recovered);
    rides_out_a_freeze(&cluster, &db, watch, lines, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_status_watch_rides_out_a_frozen_server() {
    let (cluster, db) = private_db(&[]).await;
    crate::projection::fill_behind(&db).await;
    let mut watch = Running::start(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--watch",
        "--every",
        "1s",
        "--json",
        "--events-table",
        "events",
        "shop",
    ]));
    fn checkpoint(line: &str) -> Option<i64> {
        let json: serde_json::Value = serde_json::from_str(line).unwrap();
        json["checkpoint"].as_i64()
    }
    assert_eq!(checkpoint(&watch.next_line().await), Some(3));
    let failing = "cannot read the projection's status";
    let recovered = "reading projection \"shop\" again";
    let still_at_3: fn(&str) = |line| assert_eq!(checkpoint(line), Some(3));
    rides_out_a_freeze(&cluster, &db, watch, (failing, recovered), Some(still_at_3)).await;
}
