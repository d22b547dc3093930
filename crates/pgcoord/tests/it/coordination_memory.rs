//! The coordination suite and in-memory specifics for `InMemoryLockManager`.

use std::time::Duration;

use pgcoord::coordination::acquire_many;
use pgcoord::InMemoryLockManager;

pgcoord_testkit::coordination_conformance_tests!(|| async {
    let primary = InMemoryLockManager::new(Some("memory-test".into()));
    let observer = primary.clone();
    (primary, observer, ())
});

/// The same suite through the trait object, whose `try_lock_any` forwards
/// to the manager's own.
mod through_dyn_lock_manager {
    use std::sync::Arc;

    use pgcoord::{DynLockManager, InMemoryLockManager};

    pgcoord_testkit::coordination_conformance_tests!(|| async {
        let primary: Arc<dyn DynLockManager> = Arc::new(InMemoryLockManager::new(None));
        let observer = primary.clone();
        (primary, observer, ())
    });
}

#[tokio::test]
async fn a_set_is_lost_when_any_member_is() {
    let locks = InMemoryLockManager::new(None);
    let set = acquire_many(&locks, &["a", "b", "c"], Some(Duration::ZERO))
        .await
        .unwrap();
    let signal = set.loss_signal();
    assert!(!set.is_lost() && !signal.is_lost());
    assert!(locks.simulate_loss("b"));
    assert!(set.is_lost());
    // Resolves without a task of its own: the members' tokens are waited on.
    signal.lost().await;
    set.lost().await;
    let err = set.release().await.unwrap_err();
    assert!(err.is_lock_lost() && err.key() == Some("b"), "{err:?}");
    assert!(!pgcoord::DistributedLock::is_held(&locks, "a"));
}

#[tokio::test]
async fn clones_of_a_semaphore_share_its_permits_across_tasks() {
    use pgcoord::coordination::Semaphore;
    let sem = Semaphore::new(InMemoryLockManager::new(None), "cloned", 2).unwrap();
    let spawn = |sem: Semaphore<InMemoryLockManager>| {
        tokio::spawn(async move { sem.acquire(Some(Duration::from_secs(30))).await })
    };
    let (a, b) = (spawn(sem.clone()), spawn(sem.clone()));
    let (a, b) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
    assert_ne!(a.slot(), b.slot());
    assert!(
        sem.try_acquire().await.unwrap().is_none(),
        "the clones hold both"
    );
    let freed = a.slot();
    a.release().await.unwrap();
    let c = sem
        .try_acquire()
        .await
        .unwrap()
        .expect("a's permit came back");
    assert_eq!(c.slot(), freed);
    drop((b, c));
}
