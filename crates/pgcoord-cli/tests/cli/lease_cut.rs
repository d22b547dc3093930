//! `lock run --lease` cut off from the server while the tool itself runs
//! on (a network cut, not a freeze: the watchdog has nothing to do). The
//! tool finds the loss and stops COMMAND, which ignores SIGTERM: it is
//! killed before the server frees the lock for silence, so its last sign
//! of life comes before the next holder's COMMAND starts, although
//! `--kill-grace` (10 s by default) is longer than the lease. Without a
//! lease, the cut is found by the liveness check, and said in words.

use crate::common::*;
use crate::relay::CuttableRelay;
use crate::stamps::StampLogs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leased_holder_kills_its_command_before_the_server_frees_the_lock() {
    let db = database().await;
    let Some((relay, url)) = CuttableRelay::for_database(&db).await else {
        return;
    };
    // COMMAND ignores SIGTERM and writes a time stamp every 50 ms.
    let logs = StampLogs::new(&format!("lease-cut-{}", db.name()));
    let mut holder = Running::start(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "run", "--lease", "3s", "cut-key", "--", "sh", "-c"])
            .arg(logs.stubborn_holder()),
    );
    holder.expect_line("ready").await;
    relay.cut();

    // Nobody terminates anything: the server ends the silent session
    // after the lease, and a waiter on the direct path gets the lock.
    let waiter = output(
        eventsource(Some(&db))
            .args([
                "lock",
                "run",
                "--timeout",
                "60s",
                "cut-key",
                "--",
                "sh",
                "-c",
            ])
            .arg(logs.next_holder()),
    )
    .await;
    assert_eq!(waiter.code, 0, "the waiter gets the lock: {waiter:?}");

    let out = holder.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(
        out.stderr.contains("what remains of the lease")
            || out.stderr.contains("lease has run out"),
        "the line says why SIGKILL came before --kill-grace: {}",
        out.stderr
    );
    logs.assert_no_overlap(&out.stderr);
}

/// Without a lease, a holder cut off from the server fails its liveness
/// check; the warning and the loss line say so in words (no internal
/// names), and the run exits 76.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_holder_says_its_liveness_check_got_no_answer() {
    let db = database().await;
    let Some((relay, url)) = CuttableRelay::for_database(&db).await else {
        return;
    };
    let mut holder = Running::start(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "run", "cut-plain", "--", "sh", "-c"])
            .arg("echo ready; exec sleep 600"),
    );
    holder.expect_line("ready").await;
    relay.cut();
    let out = holder.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(
        out.stderr
            .contains("lock session's liveness check got no answer in time"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("LivenessFailed"), "{}", out.stderr);
}

/// Without a lease, the server's own TCP timeouts bound how long it keeps
/// a silent session (the tool lowers them to about 15 s; here the session
/// asks for 4 s, as a server configured that way would have it): a
/// holder cut off from the server cuts `--kill-grace` (10 s) to what
/// remains of them, so that a COMMAND that ignores SIGTERM is killed
/// before the server may give its lock away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_holder_cuts_its_grace_to_the_servers_tcp_timeouts() {
    let db = database().await;
    let Some((relay, url)) = CuttableRelay::for_database(&db).await else {
        return;
    };
    let url = format!("{url}?options=-c%20tcp_user_timeout%3D4000");
    let mut holder = Running::start(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "run", "cut-tcp-timeouts", "--", "sh", "-c"])
            .arg("trap '' TERM; echo ready; while :; do sleep 0.05; done"),
    );
    holder.expect_line("ready").await;
    relay.cut();
    let out = holder.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    // Cut to what remains of the server's TCP timeouts, or, that already
    // spent when the loss was seen, SIGKILL at once.
    assert!(
        out.stderr
            .contains("lost touch with the session may give up on it")
            || out
                .stderr
                .contains("may already have given up on the silent session"),
        "the line says why SIGKILL came before --kill-grace: {}",
        out.stderr
    );
    assert!(!out.stderr.contains("SIGKILL in 10s"), "{}", out.stderr);
    assert!(!out.stderr.contains("lease"), "{}", out.stderr);
}
