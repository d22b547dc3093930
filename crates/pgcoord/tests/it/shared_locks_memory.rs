//! `InMemoryLockManager` as a reader-writer lock: the shared-lock
//! conformance suite, and the queue order with many tasks.

use pgcoord::{DistributedLock, InMemoryLockManager, LockMode, SharedLock};

pgcoord_testkit::shared_lock_conformance_tests!(|| async {
    let primary = InMemoryLockManager::new(Some("memory-rw".into()));
    (primary.clone(), primary, ())
});

/// Requests queue in arrival order across modes: readers behind a writer
/// are granted together once it leaves, a writer behind them waits for all.
#[tokio::test]
async fn mixed_queue_is_served_in_arrival_order() {
    let locks = InMemoryLockManager::new(None);
    let first = locks.acquire("q", None).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let plan = [
        LockMode::Shared,
        LockMode::Shared,
        LockMode::Exclusive,
        LockMode::Shared,
    ];
    let mut tasks = Vec::new();
    for (i, mode) in plan.into_iter().enumerate() {
        let (locks, tx, mut go) = (locks.clone(), tx.clone(), go_rx.clone());
        tasks.push(tokio::spawn(async move {
            let g = match mode {
                LockMode::Shared => locks.acquire_shared("q", None).await.unwrap(),
                LockMode::Exclusive => locks.acquire("q", None).await.unwrap(),
            };
            tx.send(i).unwrap();
            go.wait_for(|g| *g).await.unwrap();
            g.release().await.unwrap();
        }));
        // On this single-threaded runtime the yield runs the new task
        // until it queues, so each joins the queue before the next.
        tokio::task::yield_now().await;
    }
    first.release().await.unwrap();
    let mut got = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
    got.sort();
    assert_eq!(got, vec![0, 1], "the two readers at the head go together");
    assert!(rx.try_recv().is_err(), "the writer waits for both readers");
    go_tx.send(true).unwrap();
    assert_eq!(rx.recv().await, Some(2), "then the writer");
    assert_eq!(rx.recv().await, Some(3), "then the last reader");
    for t in tasks {
        t.await.unwrap();
    }
}
