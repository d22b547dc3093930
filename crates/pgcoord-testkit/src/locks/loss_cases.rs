//! The loss cases of the lock conformance suite
//! ([`lock_conformance_tests!`](crate::lock_conformance_tests)): a lock
//! taken from its holder by `release_all`, the one way to lose a lock that
//! every implementation offers, is reported as lost everywhere the ports
//! promise it; giving a manual lock back is no loss.

use std::future::Future;

use pgcoord::LockGuard;

use super::{assert_becomes_free, expect_err, key, Conformant, SETTLE};

/// Waits for a loss signal to fire; fails naming `what` if it has not
/// within [`SETTLE`] (far more than any adapter needs: a hang guard).
async fn fires(what: &str, signal: impl Future<Output = ()>) {
    if tokio::time::timeout(SETTLE, signal).await.is_err() {
        panic!("the loss was never signalled: {what}");
    }
}

/// `release_all` takes a live guard's lock: the guard, a signal taken from
/// it before and one taken after all report the loss, `lost()` resolves,
/// and releasing the guard is a lock-lost error.
#[doc(hidden)]
pub async fn release_all_makes_a_live_guard_lost<L: Conformant>(lock: &L, observer: &L) {
    let k = key("loss-all");
    let guard = lock.acquire(&k, None).await.unwrap();
    let before = guard.loss_signal();
    assert!(!guard.is_lost(), "a guard just granted reports a loss");
    assert_eq!(lock.release_all().await.unwrap(), 1);
    fires("the guard's lost()", guard.lost()).await;
    fires("a signal taken before release_all", before.lost()).await;
    assert!(guard.is_lost() && before.is_lost());
    assert!(guard.loss_signal().is_lost(), "a signal taken after");
    let what = "release() of a guard whose lock release_all took returned Ok";
    let err = expect_err(guard.release().await, what);
    assert!(err.is_lock_lost(), "{err:?}");
    assert_eq!(err.key(), Some(k.as_str()));
    assert_becomes_free(observer, &k).await;
}

/// Work run by `with_lock` is stopped when its lock is lost (here by a
/// `release_all` from inside it), and the call is a lock-lost error.
#[doc(hidden)]
pub async fn with_lock_stops_the_work_when_the_lock_is_lost<L: Conformant>(lock: &L, observer: &L) {
    let k = key("loss-with");
    let l = lock.clone();
    let (alive, dropped) = tokio::sync::oneshot::channel::<()>();
    let out = lock
        .with_lock(&k, None, move |_| async move {
            let _alive = alive;
            l.release_all().await.unwrap();
            std::future::pending::<()>().await
        })
        .await;
    let what =
        "with_lock returned Ok after its lock was taken away (release_all) while the work ran";
    let err = expect_err(out, what);
    assert!(err.is_lock_lost(), "{err:?}");
    assert!(dropped.await.is_err(), "the work was not dropped");
    assert_becomes_free(observer, &k).await;
}

/// A manual lock is given back by `release(key)` and `release_all`, which
/// are no loss: a signal taken from its guard before does not fire.
#[doc(hidden)]
pub async fn releasing_a_manual_lock_fires_no_signal<L: Conformant>(lock: &L, observer: &L) {
    let k = key("loss-manual");
    let manual = async || {
        let guard = lock.acquire(&k, None).await.unwrap();
        let signal = guard.loss_signal();
        LockGuard::into_manual(guard);
        signal
    };
    let by_key = manual().await;
    lock.release(&k).await.unwrap();
    let by_all = manual().await;
    assert_eq!(lock.release_all().await.unwrap(), 1);
    assert!(
        !by_key.is_lost(),
        "release(key) fired a manual lock's signal"
    );
    assert!(
        !by_all.is_lost(),
        "release_all fired a manual lock's signal"
    );
    assert_becomes_free(observer, &k).await;
}
