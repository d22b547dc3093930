//! The conformance suite and in-memory specifics for `InMemoryLockManager`.

use std::time::Duration;

use pgcoord::error::BackendErrorKind;
use pgcoord::{DistributedLock, InMemoryLockManager, LockRegistry};
use pgcoord_testkit::locks::Fencing;

pgcoord_testkit::lock_conformance_tests!(fencing: Fencing::Tokens, || async {
    let primary = InMemoryLockManager::new(Some("memory-test".into()));
    let observer = primary.clone();
    (primary, observer, ())
});

/// The same suite through the trait object: its `release` and
/// `release_all` must go ahead once called, as the manager's own do.
mod through_dyn_lock_manager {
    use std::sync::Arc;

    use pgcoord::{DynLockManager, InMemoryLockManager};
    use pgcoord_testkit::locks::Fencing;

    pgcoord_testkit::lock_conformance_tests!(fencing: Fencing::Tokens, || async {
        let manager = InMemoryLockManager::new(Some("memory-test".into()));
        let primary: Arc<dyn DynLockManager> = Arc::new(manager.clone());
        let observer: Arc<dyn DynLockManager> = Arc::new(manager);
        (primary, observer, ())
    });
}

#[tokio::test]
async fn waiters_are_served_in_arrival_order() {
    let locks = InMemoryLockManager::new(None);
    let holder = locks.acquire("fifo", None).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let l = locks.clone();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let g = l.acquire("fifo", None).await.unwrap();
            tx.send(i).unwrap();
            g.release().await.unwrap();
        }));
        // Let this waiter queue before the next one starts.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    holder.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    drop(tx);
    let mut order = Vec::new();
    while let Some(i) = rx.recv().await {
        order.push(i);
    }
    assert_eq!(order, (0..8).collect::<Vec<_>>());
}

#[tokio::test]
async fn simulated_loss_fires_the_signal_and_with_lock_stops() {
    let locks = InMemoryLockManager::new(None);
    let l2 = locks.clone();
    let work = tokio::spawn(async move {
        l2.with_lock("lost", None, |_| std::future::pending::<()>())
            .await
    });
    while !locks.is_held("lost") {
        tokio::task::yield_now().await;
    }
    assert!(locks.simulate_loss("lost"));
    let err = work.await.unwrap().unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    // No session ended: the in-memory signal does not say why.
    let text = err.to_string();
    assert!(
        text.ends_with("the lock was lost while the work ran"),
        "{text}"
    );
    assert!(!text.contains("session"), "{text}");
    assert_eq!(locks.held_lock_count(), 0);
    let g = locks.acquire("lost", Some(Duration::ZERO)).await.unwrap();
    g.release().await.unwrap();
}

#[tokio::test]
async fn current_fence_follows_each_grant_and_a_stale_token_is_visible() {
    let locks = InMemoryLockManager::new(None);
    assert_eq!(locks.current_fence("fenced"), None);
    let first = locks.acquire("fenced", None).await.unwrap();
    assert_eq!(locks.current_fence("fenced"), first.fence());
    let old = first.fence().unwrap();
    first.release().await.unwrap();
    let second = locks.acquire("fenced", None).await.unwrap();
    let current = locks.current_fence("fenced").unwrap();
    // What a protected resource under test would check: the old holder's
    // token is no longer the current one.
    assert!(current > old && Some(current) == second.fence());
    // Another key has its own sequence.
    let other = locks.acquire("other", None).await.unwrap();
    assert_eq!(other.fence(), Some(1));
}

/// A waiter is handed the lock and, before it runs again, the lock is
/// taken away (`end`): its acquisition must fail, as the PostgreSQL
/// manager's does for a grant whose session ended, rather than return a
/// guard that holds nothing and never learns it.
async fn lost_on_hand_off(end: impl AsyncFnOnce(&InMemoryLockManager)) {
    let locks = InMemoryLockManager::new(None);
    let holder = locks.acquire("handoff", None).await.unwrap();
    let l2 = locks.clone();
    let waiter = tokio::spawn(async move { l2.acquire("handoff", Some(HANG_GUARD)).await });
    // On this current-thread runtime the waiter runs until it queues.
    tokio::task::yield_now().await;
    drop(holder);
    assert!(locks.is_held("handoff"), "the waiter was handed the lock");
    end(&locks).await;
    let err = waiter.await.unwrap().unwrap_err();
    let closed = err.as_backend().map(|b| b.kind()) == Some(BackendErrorKind::Closed);
    assert!(closed && err.key() == Some("handoff"), "{err:?}");
    assert_eq!(locks.held_lock_count(), 0);
    let again = locks.try_lock("handoff").await.unwrap().expect("free");
    again.release().await.unwrap();
}

const HANG_GUARD: Duration = Duration::from_secs(120);

#[tokio::test]
async fn a_simulated_loss_during_a_hand_off_fails_the_acquisition() {
    lost_on_hand_off(async |l| assert!(l.simulate_loss("handoff"))).await;
}

#[tokio::test]
async fn release_all_during_a_hand_off_fails_the_acquisition() {
    lost_on_hand_off(async |l| assert_eq!(l.release_all().await.unwrap(), 1)).await;
}

/// A simulated loss is a dead session: a manual lock's signal fires, as
/// PostgreSQL's does when the backend is terminated (`release_all` and
/// `release(key)` leave it alone).
#[tokio::test]
async fn a_simulated_loss_fires_a_manual_locks_signal() {
    let locks = InMemoryLockManager::new(None);
    let guard = locks.acquire("manual-loss", None).await.unwrap();
    let signal = guard.loss_signal();
    guard.into_manual();
    assert!(locks.simulate_loss("manual-loss"));
    assert!(signal.is_lost(), "the manual lock's signal did not fire");
    signal.lost().await;
    assert!(!locks.is_held("manual-loss"));
}

#[tokio::test]
async fn with_lock_stopped_by_release_all_does_not_blame_a_session() {
    let locks = InMemoryLockManager::new(None);
    let (l2, (tx, rx)) = (locks.clone(), tokio::sync::oneshot::channel());
    let work = tokio::spawn(async move {
        l2.with_lock("swept", None, |_| async move {
            tx.send(()).unwrap();
            std::future::pending::<()>().await
        })
        .await
    });
    rx.await.unwrap();
    assert_eq!(locks.release_all().await.unwrap(), 1);
    let err = work.await.unwrap().unwrap_err();
    assert!(err.is_lock_lost() && err.key() == Some("swept"), "{err:?}");
    let text = err.to_string();
    assert!(
        text.ends_with("the lock was lost while the work ran"),
        "{text}"
    );
}
