//! `lock run --timeout` with both servers in its URL follows a failover:
//! started while the primary is down and no server accepts writes, it
//! retries, and runs the command on the standby once that is promoted.

use pgcoord_testkit::pg::StopMode;

use crate::common::*;

#[tokio::test]
async fn a_run_waiting_for_a_primary_runs_once_the_standby_is_promoted() {
    let (primary, db) = private_db(&[]).await;
    let p = primary.clone();
    let standby = std::sync::Arc::new(
        tokio::task::spawn_blocking(move || p.start_standby())
            .await
            .unwrap()
            .expect("a standby"),
    );
    let both = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
        primary.port(),
        standby.port(),
        db.name()
    );
    // Both servers answer, the primary takes the lock.
    let out = output(eventsource(None).env("DATABASE_URL", &both).args([
        "lock",
        "run",
        "--timeout",
        "30s",
        "cutover",
        "--",
        "echo",
        "first",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");

    let stopping = primary.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    let mut run = Running::start(eventsource(None).env("DATABASE_URL", &both).args([
        "lock",
        "run",
        "--timeout",
        "5m",
        "cutover",
        "--",
        "echo",
        "after failover",
    ]));
    // Nothing accepts writes: the run says it retries.
    let line = run.expect_stderr("retrying until --timeout runs out").await;
    assert!(!line.contains("held elsewhere"), "{line}");
    let s = standby.clone();
    tokio::task::spawn_blocking(move || s.promote())
        .await
        .unwrap()
        .expect("promoted");
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "after failover\n");
}
