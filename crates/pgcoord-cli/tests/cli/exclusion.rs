//! Two `lock run` processes on one key exclude each other; a killed holder's
//! lock passes on, and its command does not outlive it.

use nix::sys::signal::Signal;

use crate::common::*;

#[tokio::test]
async fn two_concurrent_runs_exclude_each_other() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let log = log.display();

    // A enters, says so, and stays until the test writes a line.
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "first",
        "shared-key",
        "--",
        "sh",
        "-c",
        &format!("echo A-in >> {log}; echo entered; read x; echo A-out >> {log}"),
    ]));
    a.expect_line("entered").await;

    // While A holds it, a single attempt fails...
    let out = output(
        eventsource(Some(&db))
            .args(["lock", "run", "--no-wait", "shared-key", "--"])
            .args(["sh", "-c", &format!("echo C-in >> {log}")]),
    )
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert!(
        out.stderr.contains("first"),
        "names the holder: {}",
        out.stderr
    );

    // ...and B queues behind A.
    let b = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "second",
        "shared-key",
        "--",
        "sh",
        "-c",
        &format!("echo B-in >> {log}; echo B-out >> {log}"),
    ]));
    let lock = wait_for(&inspector, "shared-key", "B waiting", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await
    .unwrap();
    assert_eq!(lock.holders[0].holder_id.as_deref(), Some("first"));
    assert_eq!(lock.waiters[0].holder_id.as_deref(), Some("second"));

    a.send_line("go").await;
    let a_out = a.finish().await;
    assert_eq!(a_out.code, 0, "{a_out:?}");
    let b_out = b.finish().await;
    assert_eq!(b_out.code, 0, "{b_out:?}");

    let text = std::fs::read_to_string(scratch.join("log")).unwrap();
    assert_eq!(text, "A-in\nA-out\nB-in\nB-out\n");
    assert!(is_free(&inspector, "shared-key").await);
}

#[tokio::test]
async fn sigkilled_holder_releases_and_its_command_dies_with_it() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "crash-key",
        "--",
        "sh",
        "-c",
        "echo entered; exec sleep 1000",
    ]));
    a.expect_line("entered").await;

    let waiter = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "crash-key",
        "--",
        "echo",
        "second-ran",
    ]));
    wait_for(&inspector, "crash-key", "a waiter", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;

    a.signal(Signal::SIGKILL);
    let b_out = waiter.finish().await;
    assert_eq!(b_out.code, 0, "{b_out:?}");
    assert_eq!(b_out.stdout, "second-ran\n");

    // `finish` reads A's stdout to its end: it ends only once the command
    // (`sleep`, which shares it) has died too, of the parent-death signal.
    let rest = a.finish().await;
    assert_eq!(rest.code, 128 + 9);
    assert_eq!(rest.stdout, "");
}
