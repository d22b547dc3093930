//! The basic cases of the lock conformance suite: acquire and release,
//! scopes, errors and panics in them, timeouts, key checks, release-all and
//! tasks handing locks over ([`lock_conformance_tests!`](crate::lock_conformance_tests)).

use std::sync::Arc;
use std::time::Duration;

use pgcoord::{lock_id_for_key, Error};

use super::{
    assert_becomes_free, eventually, expect_err, expect_taken, free_for, key, Conformant, SETTLE,
};

/// The lock carries the requested key, its derived id and a recent time.
#[doc(hidden)]
pub async fn acquire_yields_info_for_the_key<L: Conformant>(lock: &L, _observer: &L) {
    let k = key("info");
    let before = chrono::Utc::now();
    let guard = lock
        .acquire(&k, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(&*guard.info().key, k.as_str());
    assert_eq!(guard.info().lock_id, lock_id_for_key(&k));
    assert!(guard.info().acquired_at >= before - chrono::Duration::seconds(1));
    guard.release().await.unwrap();
}

/// `is_held` is true inside the scope and false after it.
#[doc(hidden)]
pub async fn is_held_inside_and_outside_the_scope<L: Conformant>(lock: &L, observer: &L) {
    let k = key("scope");
    assert!(!lock.is_held(&k));
    let guard = lock.acquire(&k, None).await.unwrap();
    assert!(lock.is_held(&k));
    assert_eq!(lock.held_lock_count(), 1);
    assert!(!free_for(observer, &k).await, "observer took a held key");
    guard.release().await.unwrap();
    assert!(!lock.is_held(&k));
    assert_eq!(lock.held_lock_count(), 0);
    assert!(free_for(observer, &k).await);
}

/// An error inside `with_lock` propagates and the lock is released.
#[doc(hidden)]
pub async fn error_in_scope_releases_and_propagates<L: Conformant>(lock: &L, observer: &L) {
    let k = key("error");
    let out: Result<Result<(), &str>, Error> =
        lock.with_lock(&k, None, |_| async { Err("boom") }).await;
    assert_eq!(out.unwrap(), Err("boom"));
    assert!(!lock.is_held(&k));
    assert!(free_for(observer, &k).await);
}

/// Dropping a guard releases the lock (in the background).
#[doc(hidden)]
pub async fn dropped_guard_releases<L: Conformant>(lock: &L, observer: &L) {
    let k = key("drop");
    let guard = lock.acquire(&k, None).await.unwrap();
    drop(guard);
    assert_becomes_free(observer, &k).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// A panic while holding releases the lock.
#[doc(hidden)]
pub async fn panic_in_scope_releases<L: Conformant>(lock: &L, observer: &L) {
    let k = key("panic");
    let l = lock.clone();
    let k2 = k.clone();
    let joined = tokio::spawn(async move {
        let _guard = l.acquire(&k2, None).await.unwrap();
        panic!("deliberate panic while holding the lock");
    })
    .await;
    assert!(joined.unwrap_err().is_panic());
    assert_becomes_free(observer, &k).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// Aborting a task that holds the lock releases it.
#[doc(hidden)]
pub async fn aborted_task_releases<L: Conformant>(lock: &L, observer: &L) {
    let k = key("abort");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let l = lock.clone();
    let k2 = k.clone();
    let task = tokio::spawn(async move {
        let _guard = l.acquire(&k2, None).await.unwrap();
        let _ = tx.send(());
        std::future::pending::<()>().await;
    });
    rx.await.unwrap();
    assert!(lock.is_held(&k));
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_becomes_free(observer, &k).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// `try_lock` takes a free key and answers `None` for a held one; its
/// guard gives the key back.
#[doc(hidden)]
pub async fn try_lock_free_then_held<L: Conformant>(lock: &L, observer: &L) {
    let k = key("try");
    let guard = expect_taken(lock.try_lock(&k).await, "try_lock");
    assert_eq!(guard.key(), k);
    assert!(lock.is_held(&k));
    assert!(
        lock.try_lock(&k).await.unwrap().is_none(),
        "second local owner"
    );
    assert!(
        observer.try_lock(&k).await.unwrap().is_none(),
        "observer got it"
    );
    guard.release().await.unwrap();
    assert!(!lock.is_held(&k));
    assert_becomes_free(observer, &k).await;
}

/// A guard turned into a manual lock stays held until `release(key)`,
/// which gives the key back; a second `release` says it is not held.
#[doc(hidden)]
pub async fn manual_lock_is_held_until_release<L: Conformant>(lock: &L, observer: &L) {
    let k = key("manual");
    let info = expect_taken(lock.try_lock(&k).await, "try_lock").into_manual();
    assert_eq!(&*info.key, k.as_str());
    assert!(lock.is_held(&k));
    assert!(
        observer.try_lock(&k).await.unwrap().is_none(),
        "a manual lock is held after its guard is gone"
    );
    lock.release(&k).await.unwrap();
    assert!(!lock.is_held(&k));
    let again = "a second release(key) of a released manual lock returned Ok";
    assert!(expect_err(lock.release(&k).await, again).is_not_held());
    assert_becomes_free(observer, &k).await;
}

/// After `release`, the key can be taken again.
#[doc(hidden)]
pub async fn release_makes_key_acquirable<L: Conformant>(lock: &L, observer: &L) {
    let k = key("reacquire");
    expect_taken(lock.try_lock(&k).await, "try_lock").into_manual();
    lock.release(&k).await.unwrap();
    assert!(!lock.is_held(&k));
    assert!(free_for(observer, &k).await);
    assert!(lock
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_some());
    lock.release(&k).await.unwrap();
}

/// Releasing a key never held is a not-held error naming the key.
#[doc(hidden)]
pub async fn release_of_never_held_key_is_not_held_error<L: Conformant>(lock: &L, _o: &L) {
    let k = key("never");
    let what = "release(key) of a key this manager never held returned Ok";
    let err = expect_err(lock.release(&k).await, what);
    assert!(err.is_not_held(), "{err:?}");
    assert_eq!(err.key(), Some(k.as_str()));
}

/// A timed-out acquisition is an acquisition error carrying key and timeout.
#[doc(hidden)]
pub async fn timeout_on_held_key_carries_the_timeout<L: Conformant>(lock: &L, observer: &L) {
    let k = key("timeout");
    let guard = observer.acquire(&k, None).await.unwrap();
    // Connected first: a deadline that passes before the server answered
    // at all is not "held elsewhere".
    if let Some(warm) = lock.try_lock(&key("warm")).await.unwrap() {
        warm.release().await.unwrap();
    }
    let before = lock.held_lock_count();
    let t = Duration::from_millis(150);
    let what = "acquire with a timeout on a key held by another manager returned a guard";
    let err = expect_err(lock.acquire(&k, Some(t)).await, what);
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(err.key(), Some(k.as_str()));
    assert_eq!(err.as_lock_acquisition().unwrap().timeout, Some(t));
    assert_eq!(
        lock.held_lock_count(),
        before,
        "a timed-out attempt changed the count"
    );
    guard.release().await.unwrap();
}

/// A zero timeout makes exactly one attempt.
#[doc(hidden)]
pub async fn zero_timeout_makes_one_attempt<L: Conformant>(lock: &L, observer: &L) {
    let k = key("zero");
    let guard = observer.acquire(&k, None).await.unwrap();
    let what = "acquire with a zero timeout on a key held by another manager returned a guard";
    let err = expect_err(lock.acquire(&k, Some(Duration::ZERO)).await, what);
    assert!(err.is_timeout(), "a held key with a zero timeout: {err:?}");
    assert!(lock.try_lock(&k).await.unwrap().is_none());
    guard.release().await.unwrap();
    let g = lock.acquire(&k, Some(Duration::ZERO)).await.unwrap();
    g.release().await.unwrap();
}

/// Holding one key does not block another.
#[doc(hidden)]
pub async fn different_keys_are_independent<L: Conformant>(lock: &L, observer: &L) {
    let a = key("indep-a");
    let b = key("indep-b");
    let ga = lock.acquire(&a, None).await.unwrap();
    let gb = observer
        .acquire(&b, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(lock.is_held(&a));
    ga.release().await.unwrap();
    gb.release().await.unwrap();
}

/// `release_all` returns the count and empties the registry.
#[doc(hidden)]
pub async fn release_all_returns_count_and_empties<L: Conformant>(lock: &L, observer: &L) {
    let keys: Vec<String> = (0..3).map(|i| key(&format!("all-{i}"))).collect();
    for k in &keys {
        expect_taken(lock.try_lock(k).await, "try_lock").into_manual();
    }
    let guarded = key("all-guard");
    let guard = lock.acquire(&guarded, None).await.unwrap();
    assert_eq!(lock.held_lock_count(), 4);
    assert_eq!(lock.release_all().await.unwrap(), 4);
    assert_eq!(lock.held_lock_count(), 0);
    for k in keys.iter().chain([&guarded]) {
        assert!(!lock.is_held(k));
        assert!(free_for(observer, k).await, "{k} still held");
    }
    // The guard's lock went with release_all: releasing it reports that.
    let after = guard.release().await;
    assert!(
        after.is_err(),
        "release after release_all should report the loss"
    );
    assert_eq!(lock.release_all().await.unwrap(), 0);
}

/// A guard turned manual is released by key.
#[doc(hidden)]
pub async fn into_manual_then_release_by_key<L: Conformant>(lock: &L, observer: &L) {
    let k = key("manual");
    let info = lock.acquire(&k, None).await.unwrap().into_manual();
    assert_eq!(&*info.key, k.as_str());
    assert!(lock.is_held(&k));
    assert!(!free_for(observer, &k).await);
    lock.release(&k).await.unwrap();
    assert!(free_for(observer, &k).await);
    let again = "a second release(key) of a released manual lock returned Ok";
    assert!(expect_err(lock.release(&k).await, again).is_not_held());
}

/// `with_lock` hands back the closure's value and releases.
#[doc(hidden)]
pub async fn with_lock_returns_value_and_releases<L: Conformant>(lock: &L, observer: &L) {
    let k = key("with");
    let k2 = k.clone();
    let lock2 = lock.clone();
    let v = lock
        .with_lock(&k, Some(Duration::from_secs(5)), move |info| async move {
            assert!(lock2.is_held(&k2));
            info.lock_id
        })
        .await
        .unwrap();
    assert_eq!(v, lock_id_for_key(&k));
    assert!(!lock.is_held(&k));
    assert!(free_for(observer, &k).await);
}

/// The empty key is a key like any other; a key of 1 MiB (which another
/// language's service may lock on) works and excludes; a longer one is
/// refused.
#[doc(hidden)]
pub async fn empty_key_is_allowed_and_huge_key_rejected<L: Conformant>(lock: &L, observer: &L) {
    let g = lock
        .acquire("", Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(g.lock_id(), 7183457195969485844);
    g.release().await.unwrap();
    let long = format!("{}{}", key("long"), "k".repeat(1 << 20));
    let long = &long[..1 << 20];
    let g = lock
        .acquire(long, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(g.lock_id(), lock_id_for_key(long));
    assert!(!free_for(observer, long).await);
    g.release().await.unwrap();
    let huge = "k".repeat((1 << 20) + 1);
    let what = "acquire of a key longer than MAX_KEY_LEN returned a guard";
    let err = expect_err(lock.acquire(&huge, None).await, what);
    assert!(
        matches!(
            err.as_lock_acquisition().map(|e| &e.reason),
            Some(pgcoord::error::AcquireFailure::KeyTooLong { .. })
        ),
        "a key longer than MAX_KEY_LEN must fail with AcquireFailure::KeyTooLong: {err:?}"
    );
    let tried = lock.try_lock(&huge).await.map(|g| g.is_some());
    assert!(
        tried.is_err(),
        "try_lock of a key longer than MAX_KEY_LEN returned {tried:?}"
    );
    assert_eq!(lock.held_lock_count(), 0);
}

/// Two tasks of one manager hand a key back and forth; the bookkeeping
/// always names exactly one holder.
#[doc(hidden)]
pub async fn handovers_between_tasks_keep_counts_exact<L: Conformant>(lock: &L, _o: &L) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let k = key("handover");
    let rounds = 30;
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let l = lock.clone();
        let k = k.clone();
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let g = l.acquire(&k, Some(Duration::from_secs(30))).await.unwrap();
                assert!(
                    !inside.swap(true, Ordering::SeqCst),
                    "two local owners at once"
                );
                assert!(l.is_held(&k), "holder not recorded");
                assert_eq!(l.held_lock_count(), 1, "count off while held");
                tokio::task::yield_now().await;
                inside.store(false, Ordering::SeqCst);
                g.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(!lock.is_held(&k));
    assert_eq!(lock.held_lock_count(), 0);
}

/// A waiter gets the lock once the holder releases it.
#[doc(hidden)]
pub async fn waiter_gets_lock_after_release<L: Conformant>(lock: &L, observer: &L) {
    let k = key("waiter");
    let guard = observer.acquire(&k, None).await.unwrap();
    let l = lock.clone();
    let k2 = k.clone();
    let waiter = tokio::spawn(async move { l.acquire(&k2, Some(Duration::from_secs(30))).await });
    tokio::task::yield_now().await;
    guard.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    assert!(lock.is_held(&k));
    g.release().await.unwrap();
}

/// Many tasks on distinct keys all succeed; nothing is left held.
#[doc(hidden)]
pub async fn many_tasks_distinct_keys<L: Conformant>(lock: &L, _o: &L) {
    let mut tasks = Vec::new();
    for i in 0..64 {
        let l = lock.clone();
        let k = key(&format!("many-{i}"));
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let g = l.acquire(&k, Some(Duration::from_secs(30))).await.unwrap();
                g.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(lock.held_lock_count(), 0);
}
