//! The workloads dropped part-way leak nothing: every lock is released and
//! no task of theirs goes on (the cancel-safety claims of their docs).

use std::time::Duration;

use pgcoord::LockRegistry;
use pgcoord::PostgresLockManager;
use pgcoord_testkit::locks::{eventually, poll_n_then_drop};
use pgcoord_testkit::pg::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_dropped_at_any_poll_hold_nothing_afterwards() {
    let db = TestDatabase::create().await.unwrap();
    let a = PostgresLockManager::builder(db.config().into())
        .holder_id("drop-a")
        .build()
        .unwrap();
    let b = PostgresLockManager::builder(db.config().into())
        .holder_id("drop-b")
        .build()
        .unwrap();
    let window = Duration::from_secs(30); // longer than the test: only a drop ends them
    for n in [1, 2, 3, 5, 8, 13, 21] {
        let idle = Duration::from_millis(20);
        let seq = pgcoord_workloads::sequential_pairs(&a, "drop/seq", window);
        assert!(poll_n_then_drop(seq, n, idle).await.is_none());
        let conc = pgcoord_workloads::concurrent_pairs(&a, "drop/conc", 8, window);
        assert!(poll_n_then_drop(conc, n, idle).await.is_none());
        let prefix = format!("drop/hand/{n}");
        let hand = pgcoord_workloads::handover(&a, &b, &prefix, window);
        assert!(poll_n_then_drop(hand, n, idle).await.is_none());
        let limit = Duration::from_secs(10);
        eventually("a's locks released", limit, || a.held_lock_count() == 0).await;
        eventually("b's locks released", limit, || b.held_lock_count() == 0).await;
        eventually("nobody waits", limit, || {
            a.waiting_tasks() + b.waiting_tasks() == 0
        })
        .await;
    }
    // No aborted task goes on taking locks (nothing would announce it: a
    // short look after the fact, not a timing assertion).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.held_lock_count() + b.held_lock_count(), 0);
}
