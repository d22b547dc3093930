//! The lock is lost while the command runs (its backend is terminated):
//! the command gets SIGTERM, then SIGKILL after --kill-grace; exit 76.

use crate::common::*;

#[tokio::test]
async fn lost_lock_stops_the_command_with_sigterm_and_exits_76() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "doomed-term",
        "lossy",
        "--",
        "bash",
        "-c",
        "trap 'echo got-TERM; exit 0' TERM; echo ready; read y; echo not-stopped",
    ]));
    run.expect_line("ready").await;
    wait_for(&inspector, "lossy", "the holder", |l| l.is_some()).await;
    terminate_holder(&db, "doomed-term").await;

    run.expect_line("got-TERM").await;
    let out = run.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
    assert!(out.stderr.contains("SIGTERM"), "{}", out.stderr);
    // How it was lost, in the server's words.
    assert!(
        out.stderr.contains(
            "was lost (the server ended the session holding the lock: \
             terminating connection due to administrator command (SQLSTATE 57P01))"
        ),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_command_ignoring_sigterm_gets_sigkill_after_the_grace() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "doomed-kill",
        "--kill-grace",
        "100ms",
        "--lost-exit-code",
        "91",
        "stubborn",
        "--",
        "bash",
        "-c",
        // SIGTERM stays ignored across exec.
        "trap '' TERM; echo ready; exec sleep 1000",
    ]));
    run.expect_line("ready").await;
    wait_for(&inspector, "stubborn", "the holder", |l| l.is_some()).await;
    terminate_holder(&db, "doomed-kill").await;

    let out = run.finish().await;
    assert_eq!(out.code, 91, "{out:?}");
    assert!(out.stderr.contains("SIGKILL"), "{}", out.stderr);
    assert!(out.stderr.contains("signal 9"), "{}", out.stderr);
}

#[tokio::test]
async fn a_server_restart_is_a_lost_lock() {
    use pgcoord_testkit::pg::StopMode;

    // A cluster of its own: restarting the shared one would break other tests.
    let (cluster, db) = private_db(&[]).await;
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "restarted",
        "--",
        "bash",
        "-c",
        "trap 'echo got-TERM; exit 0' TERM; echo ready; read y; echo not-stopped",
    ]));
    run.expect_line("ready").await;
    let restarting = cluster.clone();
    tokio::task::spawn_blocking(move || restarting.restart(StopMode::Fast))
        .await
        .unwrap()
        .expect("restart");

    run.expect_line("got-TERM").await;
    let out = run.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
}
