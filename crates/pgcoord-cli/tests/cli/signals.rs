//! SIGINT/SIGTERM to `lock run` reach the command; the lock is released
//! only after the command has exited. While waiting, they end the wait.

use nix::sys::signal::Signal;
use pgcoord::lock_id_for_key;

use crate::common::*;

/// The command traps the signal, says so, and exits (with `code`) only when
/// the test writes a line: the test checks the lock in between.
async fn forwards(sig: Signal, trap: &str, code: i32) {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let key = format!("forward-{}", sig.as_str());
    let script = format!(
        "trap 'echo got-{trap}; read x; exit {code}' {trap}; echo ready; read y; echo not-interrupted"
    );
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "forwarder",
        &key,
        "--",
        "bash",
        "-c",
        &script,
    ]));
    run.expect_line("ready").await;
    run.signal(sig);
    run.expect_line(&format!("got-{trap}")).await;

    // The command is handling the signal and has not exited: the lock is
    // still held by the tool.
    let locks = pgcoord::inspect::query_holders(&inspector, &[&key])
        .await
        .unwrap();
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!(locks[0].holders[0].holder_id.as_deref(), Some("forwarder"));

    run.send_line("done").await;
    let out = run.finish().await;
    assert_eq!(out.code, code, "{out:?}");
    assert_eq!(out.stdout, "", "the command did not go on after the signal");
    assert!(
        is_free(&inspector, &key).await,
        "released after the command exited"
    );
}

#[tokio::test]
async fn sigterm_is_forwarded_and_release_waits_for_the_command() {
    forwards(Signal::SIGTERM, "TERM", 7).await;
}

#[tokio::test]
async fn sigint_is_forwarded_and_release_waits_for_the_command() {
    forwards(Signal::SIGINT, "INT", 8).await;
}

#[tokio::test]
async fn sigusr1_sigusr2_and_sigalrm_are_forwarded_too() {
    forwards(Signal::SIGUSR1, "USR1", 10).await;
    forwards(Signal::SIGUSR2, "USR2", 11).await;
    forwards(Signal::SIGALRM, "ALRM", 12).await;
}

#[tokio::test]
async fn a_signal_while_waiting_ends_the_wait_without_running_the_command() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let holder = session(&db, "eventsource/elsewhere").await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key("queued")])
        .await
        .unwrap();
    let run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "queued",
        "--",
        "echo",
        "must-not-run",
    ]));
    wait_for(&inspector, "queued", "the tool waiting", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    run.signal(Signal::SIGTERM);
    let out = run.finish().await;
    assert_eq!(out.code, 128 + 15, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("SIGTERM"), "{}", out.stderr);
    // The wait left the queue: only the holder remains.
    wait_for(&inspector, "queued", "the waiter gone", |l| {
        l.is_some_and(|l| l.waiters.is_empty())
    })
    .await;
}
