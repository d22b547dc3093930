//! `lock run --permits N`: at most N commands at once on one KEY, the rest
//! queued in arrival order; the permit in EVENTSOURCE_LOCK_PERMIT; a count
//! mismatch and bad counts refused.

use nix::sys::signal::Signal;
use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

use crate::common::*;

/// `lock run --permits N KEY -- sh -c SCRIPT`, its stdin a pipe.
fn permit_run(
    db: &pgcoord_testkit::pg::TestDatabase,
    n: &str,
    extra: &[&str],
    script: &str,
) -> Running {
    Running::start(
        eventsource(Some(db))
            .args(["lock", "run", "--permits", n])
            .args(extra)
            .args(["pool", "--", "sh", "-c", script]),
    )
}

const HOLD: &str = "echo in $EVENTSOURCE_LOCK_PERMIT; read x";

#[tokio::test]
async fn at_most_n_commands_run_and_a_waiter_gets_the_freed_permit() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut a = permit_run(&db, "2", &[], HOLD);
    let mut b = permit_run(&db, "2", &[], HOLD);
    let (pa, pb) = (a.next_line().await, b.next_line().await);
    let mut both = [pa.clone(), pb.clone()];
    both.sort();
    assert_eq!(both, ["in 0", "in 1"], "two distinct permits");

    // Full: one attempt fails with the conflict code and says why.
    let out = output(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--permits",
        "2",
        "--no-wait",
        "pool",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert!(
        out.stderr.contains("semaphore \"pool\" not acquired") && out.stderr.contains("2 permits"),
        "{}",
        out.stderr
    );

    // A waiter queues (it holds the turnstile while it is first in line)...
    let mut c = permit_run(&db, "2", &["--holder-id", "third"], HOLD);
    wait_for(&inspector, "pool#turnstile", "the waiter queued", |l| {
        l.is_some_and(|l| l.holders.len() == 1)
    })
    .await;
    // The name's own lock is never taken: `lock holders pool` says that
    // the semaphore is in use, and which keys list it.
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "pool"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(
            "pool: as a semaphore (`lock run --permits`): 2 permits held, 1 run waiting; \
             `eventsource lock holders 'pool#permit/0' 'pool#permit/1' 'pool#turnstile'`"
        ),
        "{}",
        out.stdout
    );
    // So does `lock top pool` (one listing, stdout not a terminal).
    let out = output(eventsource(Some(&db)).args(["lock", "top", "pool"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("pool: as a semaphore (`lock run --permits`): 2 permits held, 1 run waiting"),
        "{}",
        out.stdout
    );
    // ...and takes the permit A gives back.
    a.send_line("done").await;
    assert_eq!(a.finish().await.code, 0);
    assert_eq!(c.next_line().await, pa);
    for r in [b, c] {
        let mut r = r;
        r.send_line("done").await;
        let out = r.finish().await;
        assert_eq!(out.code, 0, "{out:?}");
    }
    // C, as head waiter, looked at the slots in turn; a look at B's slot
    // can be granted once B releases it, after C's permit came another way.
    // Such a grant is given back at once (or, when it raced a cancel
    // request, freed as its session ends): nothing stays held.
    for k in ["pool#permit/0", "pool#permit/1", "pool#turnstile"] {
        wait_for(&inspector, k, "the key free", |l| l.is_none()).await;
    }
}

#[tokio::test]
async fn a_killed_holders_permit_goes_to_the_waiter() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut a = permit_run(&db, "1", &[], HOLD);
    assert_eq!(a.next_line().await, "in 0");
    let mut b = permit_run(
        &db,
        "1",
        &[],
        "echo in $EVENTSOURCE_LOCK_PERMIT $EVENTSOURCE_LOCK_ID",
    );
    wait_for(&inspector, "pool#turnstile", "the waiter queued", |l| {
        l.is_some_and(|l| l.holders.len() == 1)
    })
    .await;
    a.signal(Signal::SIGKILL);
    let id = pgcoord::lock_id_for_key("pool#permit/0");
    assert_eq!(b.next_line().await, format!("in 0 {id}"));
    assert_eq!(b.finish().await.code, 0);
    assert_eq!(a.finish().await.code, 128 + 9);
}

#[tokio::test]
async fn a_holder_with_more_permits_is_a_configuration_error() {
    let db = database().await;
    // Someone uses "pool" with 3 permits and holds all three.
    let other = PostgresLockManager::builder(db.config().into())
        .build()
        .unwrap();
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(
            other
                .acquire(&format!("pool#permit/{i}"), None)
                .await
                .unwrap(),
        );
    }
    let out = output(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--permits",
        "2",
        "--timeout",
        "60s",
        "pool",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, 78, "{out:?}");
    assert!(out.stderr.contains("same --permits"), "{}", out.stderr);
    drop(held);
}

#[tokio::test]
async fn bad_permit_counts_are_usage_errors() {
    for args in [
        &["--permits", "0"][..],
        &["--permits", "10001"],
        &["--permits", "two"],
        &["--permits", "2", "--fence"],
    ] {
        let out = output(
            eventsource(None)
                .args(["lock", "run"])
                .args(args)
                .args(["pool", "--", "true"]),
        )
        .await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
    }
}
