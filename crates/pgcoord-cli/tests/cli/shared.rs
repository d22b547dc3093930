//! `lock run --shared`: shared runs of one KEY at once, an exclusive run
//! kept out and served in its turn, shared runs never passing a queued
//! exclusive one, and the flags it does not combine with.

use crate::common::*;

/// `lock run [--shared] KEY -- sh -c SCRIPT`, its stdin a pipe.
fn run(db: &pgcoord_testkit::pg::TestDatabase, extra: &[&str], script: &str) -> Running {
    Running::start(
        eventsource(Some(db))
            .args(["lock", "run"])
            .args(extra)
            .args(["books", "--", "sh", "-c", script]),
    )
}

const HOLD: &str = "echo in ${EVENTSOURCE_LOCK_MODE:-exclusive}; read x";

fn modes(lock: &pgcoord::inspect::AdvisoryLock) -> Vec<&str> {
    lock.holders.iter().map(|h| h.mode.as_str()).collect()
}

#[tokio::test]
async fn shared_runs_share_and_an_exclusive_run_waits_its_turn() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut a = run(&db, &["--shared"], HOLD);
    let mut b = run(&db, &["--shared"], HOLD);
    assert_eq!(a.next_line().await, "in shared");
    assert_eq!(b.next_line().await, "in shared");
    let seen = wait_for(&inspector, "books", "two shared holders", |l| {
        l.is_some_and(|l| l.holders.len() == 2)
    })
    .await
    .unwrap();
    assert_eq!(modes(&seen), ["ShareLock", "ShareLock"], "{seen:?}");

    // An exclusive attempt fails while they hold...
    let out =
        output(eventsource(Some(&db)).args(["lock", "run", "--no-wait", "books", "--", "true"]))
            .await;
    assert_eq!(out.code, 75, "{out:?}");

    // ...an exclusive run queues, and then no shared run gets past it.
    let mut w = run(&db, &[], HOLD);
    wait_for(&inspector, "books", "the exclusive run queued", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;
    let out = output(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--shared",
        "--no-wait",
        "books",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(
        out.code, 75,
        "a shared run passed a queued exclusive one: {out:?}"
    );
    assert!(out.stderr.contains("shared mode"), "{}", out.stderr);

    for r in [a, b] {
        let mut r = r;
        r.send_line("done").await;
        assert_eq!(r.finish().await.code, 0);
    }
    assert_eq!(w.next_line().await, "in exclusive");
    let seen = wait_for(&inspector, "books", "the exclusive holder", |l| {
        l.is_some_and(|l| l.holders.len() == 1)
    })
    .await
    .unwrap();
    assert_eq!(modes(&seen), ["ExclusiveLock"]);
    w.send_line("done").await;
    assert_eq!(w.finish().await.code, 0);
    assert!(is_free(&inspector, "books").await);
}

#[tokio::test]
async fn shared_does_not_combine_with_fence_permits_or_also() {
    let db = database().await;
    for extra in [["--fence"], ["--permits=2"], ["--also=other"]] {
        let out = output(
            eventsource(Some(&db))
                .args(["lock", "run", "--shared"])
                .args(extra)
                .args(["books", "--", "true"]),
        )
        .await;
        assert_eq!(out.code, 2, "{extra:?}: {out:?}");
        assert!(out.stderr.contains("--shared"), "{}", out.stderr);
    }
}

#[tokio::test]
async fn a_shared_run_whose_session_ends_stops_with_the_lost_code() {
    let db = database().await;
    let mut a = run(&db, &["--shared", "--holder-id", "reader-a"], HOLD);
    let mut b = run(&db, &["--shared", "--holder-id", "reader-b"], HOLD);
    assert_eq!(a.next_line().await, "in shared");
    assert_eq!(b.next_line().await, "in shared");
    terminate_holder(&db, "reader-a").await;
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("lost"), "{}", out.stderr);
    // The other reader is untouched.
    b.send_line("done").await;
    assert_eq!(b.finish().await.code, 0);
}
