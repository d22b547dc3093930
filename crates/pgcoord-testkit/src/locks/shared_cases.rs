//! Conformance cases for reader-writer locks ([`SharedLock`]): shared holds
//! coexist and exclude exclusive ones, the queue is first come first served
//! across both modes (a writer behind a stream of readers is served), a
//! downgrade leaves no gap, and a lock taken away cannot be downgraded.
//!
//! ```no_run
//! use pgcoord::InMemoryLockManager;
//!
//! pgcoord_testkit::shared_lock_conformance_tests!(|| async {
//!     let primary = InMemoryLockManager::new(None);
//!     (primary.clone(), primary, ())
//! });
//! ```

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgcoord::{LockGuard, LockMode, SharedLock};

use super::{
    assert_becomes_free, assert_left_nothing, drop_at_every_poll, eventually, eventually_async,
    expect_err, free_for, key, poll_n_then_drop, Conformant, IDLE, MAX_POLLS, SETTLE,
};

/// What a shared-lock conformance case needs of an implementation.
pub trait SharedConformant: Conformant + SharedLock {}
impl<T: Conformant + SharedLock> SharedConformant for T {}

/// Generates one `#[tokio::test]` per shared-lock case; the factory is the
/// same as for [`lock_conformance_tests!`](crate::lock_conformance_tests).
#[macro_export]
macro_rules! shared_lock_conformance_tests {
    ($make:expr) => {
        $crate::__lock_conformance_cases!($make;
            shared_holds_coexist_and_exclude_writers,
            a_writer_excludes_readers,
            a_writer_behind_a_stream_of_readers_is_served,
            downgrade_leaves_no_gap,
            downgraded_lock_lets_readers_in_and_releases,
            shared_timeout_carries_the_timeout,
            dropped_shared_guard_releases,
            cancel_acquire_shared_at_every_poll,
            cancel_try_lock_shared_at_every_poll,
            cancel_downgrade_at_every_poll,
            release_all_counts_shared_holds,
            manual_shared_hold_releases_by_key,
            downgrade_of_a_lost_lock_is_lock_lost,
        );
    };
}

const WAIT: Option<Duration> = Some(Duration::from_secs(30));

async fn shared<L: SharedConformant>(lock: &L, k: &str) -> LockGuard {
    lock.acquire_shared(k, WAIT).await.expect("shared hold")
}

/// Whether `observer` could take a shared hold right now (given back).
async fn reader_admitted<L: SharedConformant>(observer: &L, k: &str) -> bool {
    match observer.try_lock_shared(k).await.expect("try_lock_shared") {
        Some(g) => {
            g.release().await.expect("release shared");
            true
        }
        None => false,
    }
}

/// Many shared holders at once, in one manager and across two; none has a
/// fencing token; an exclusive try fails while any of them holds.
#[doc(hidden)]
pub async fn shared_holds_coexist_and_exclude_writers<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-coexist");
    let a = shared(lock, &k).await;
    let b = shared(lock, &k).await;
    let c = shared(observer, &k).await;
    for g in [&a, &b, &c] {
        assert_eq!(g.mode(), LockMode::Shared);
        assert_eq!(g.fence(), None, "shared holds take no fencing token");
    }
    assert!(lock.is_held(&k));
    assert!(
        lock.held_lock_count() >= 2,
        "two shared holds of the primary"
    );
    assert!(
        !free_for(observer, &k).await,
        "an exclusive try passed readers"
    );
    a.release().await.unwrap();
    b.release().await.unwrap();
    assert!(!free_for(observer, &k).await, "one reader is still there");
    c.release().await.unwrap();
    assert_becomes_free(observer, &k).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// An exclusive holder keeps shared tries out, and readers then get in.
#[doc(hidden)]
pub async fn a_writer_excludes_readers<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-writer");
    let w = lock.acquire(&k, WAIT).await.unwrap();
    assert_eq!(w.mode(), LockMode::Exclusive);
    assert!(observer.try_lock_shared(&k).await.unwrap().is_none());
    assert!(
        lock.try_lock_shared(&k).await.unwrap().is_none(),
        "own writer"
    );
    w.release().await.unwrap();
    let r = shared(observer, &k).await;
    r.release().await.unwrap();
}

/// Fairness: with a reader holding, a queued writer stops new readers (a
/// shared try fails), a reader arriving after the writer waits behind it,
/// and the writer is served before that reader.
#[doc(hidden)]
pub async fn a_writer_behind_a_stream_of_readers_is_served<L: SharedConformant>(
    lock: &L,
    observer: &L,
) {
    let k = key("rw-fair");
    let first = shared(lock, &k).await;
    assert!(reader_admitted(observer, &k).await, "readers share");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (release_w, w_may_go) = tokio::sync::oneshot::channel::<()>();
    let writer = {
        let (o, k, tx) = (observer.clone(), k.clone(), tx.clone());
        tokio::spawn(async move {
            let g = o.acquire(&k, WAIT).await.expect("the writer is served");
            tx.send("writer").unwrap();
            let _ = w_may_go.await;
            g.release().await.unwrap();
        })
    };
    // The writer is queued once readers are no longer admitted.
    eventually_async("the writer queues and holds readers back", || async {
        !reader_admitted(lock, &k).await
    })
    .await;
    let late_reader = {
        let (l, k, tx) = (lock.clone(), k.clone(), tx.clone());
        tokio::spawn(async move {
            let g = l.acquire_shared(&k, WAIT).await.expect("the late reader");
            tx.send("late reader").unwrap();
            g.release().await.unwrap();
        })
    };
    first.release().await.unwrap();
    assert_eq!(rx.recv().await, Some("writer"), "the writer came first");
    release_w.send(()).unwrap();
    assert_eq!(rx.recv().await, Some("late reader"));
    writer.await.unwrap();
    late_reader.await.unwrap();
    assert_becomes_free(observer, &k).await;
}

/// A downgrade never leaves the key free: an exclusive try hammering the
/// key from the other manager never succeeds across it.
#[doc(hidden)]
pub async fn downgrade_leaves_no_gap<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-downgrade");
    let g = lock.acquire(&k, WAIT).await.unwrap();
    let fence = g.fence();
    let stop = Arc::new(AtomicBool::new(false));
    let (tries, wins) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let hammer = {
        let (o, k) = (observer.clone(), k.clone());
        let (stop, tries, wins) = (stop.clone(), tries.clone(), wins.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Some(g) = o.try_lock(&k).await.unwrap() {
                    wins.fetch_add(1, Ordering::SeqCst);
                    g.release().await.unwrap();
                }
                tries.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        })
    };
    eventually("the hammer runs", SETTLE, || {
        tries.load(Ordering::SeqCst) > 2
    })
    .await;
    let g = g.downgrade().await.expect("downgrade");
    let after = tries.load(Ordering::SeqCst);
    eventually("the hammer tries after the downgrade", SETTLE, || {
        tries.load(Ordering::SeqCst) > after + 2
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    hammer.await.unwrap();
    assert_eq!(wins.load(Ordering::SeqCst), 0, "a writer got in");
    assert_eq!(g.mode(), LockMode::Shared);
    assert_eq!(g.fence(), fence, "a downgraded guard keeps its token");
    assert!(!g.is_lost());
    g.release().await.unwrap();
    assert_becomes_free(observer, &k).await;
}

/// After a downgrade, readers of both managers get in, a writer waits for
/// every reader, and downgrading a shared guard changes nothing.
#[doc(hidden)]
pub async fn downgraded_lock_lets_readers_in_and_releases<L: SharedConformant>(
    lock: &L,
    observer: &L,
) {
    let k = key("rw-downgraded");
    let g = lock.acquire(&k, WAIT).await.unwrap();
    assert!(!reader_admitted(observer, &k).await);
    let g = g.downgrade().await.unwrap();
    let g = g
        .downgrade()
        .await
        .expect("a shared guard downgrades to itself");
    let other = shared(observer, &k).await;
    let own = shared(lock, &k).await;
    assert!(!free_for(observer, &k).await, "readers hold");
    g.release().await.unwrap();
    own.release().await.unwrap();
    assert!(!free_for(observer, &k).await, "the observer's reader holds");
    other.release().await.unwrap();
    assert_becomes_free(observer, &k).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// A shared acquisition that times out behind a writer says so.
#[doc(hidden)]
pub async fn shared_timeout_carries_the_timeout<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-timeout");
    let w = observer.acquire(&k, WAIT).await.unwrap();
    let t = Duration::from_millis(50);
    let what = "acquire_shared with a timeout on a key a writer holds returned a guard";
    let err = expect_err(lock.acquire_shared(&k, Some(t)).await, what);
    assert!(err.is_timeout(), "{err}");
    assert_eq!(err.as_lock_acquisition().unwrap().timeout, Some(t));
    w.release().await.unwrap();
    assert!(reader_admitted(lock, &k).await);
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// Dropping a shared guard releases its hold.
#[doc(hidden)]
pub async fn dropped_shared_guard_releases<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-drop");
    drop(shared(lock, &k).await);
    assert_becomes_free(observer, &k).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// A contended shared acquisition dropped after any number of polls
/// leaks nothing (the writer ahead is then released and the key is free).
#[doc(hidden)]
pub async fn cancel_acquire_shared_at_every_poll<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-cancel");
    let w = observer.acquire(&k, WAIT).await.unwrap();
    // Queued behind the writer: each round waits `IDLE` per poll, so a few.
    for n in 0..8 {
        let out = poll_n_then_drop(lock.acquire_shared(&k, None), n, IDLE).await;
        assert!(out.is_none(), "granted past a writer");
    }
    w.release().await.unwrap();
    let acquire = || lock.acquire_shared(&k, None);
    let release = |g: pgcoord::Result<LockGuard>| async {
        g.unwrap().release().await.unwrap();
    };
    drop_at_every_poll("acquire_shared", lock, observer, &k, acquire, release).await;
}

/// `try_lock_shared` dropped after any number of polls leaks nothing: a
/// hold taken for the dropped call is released.
#[doc(hidden)]
pub async fn cancel_try_lock_shared_at_every_poll<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-cancel-try");
    let try_lock = || lock.try_lock_shared(&k);
    let release = |g: pgcoord::Result<Option<LockGuard>>| async {
        g.unwrap()
            .expect("the key is free")
            .release()
            .await
            .unwrap();
    };
    drop_at_every_poll("try_lock_shared", lock, observer, &k, try_lock, release).await;
}

/// A downgrade dropped after any number of polls releases the lock,
/// whether or not the downgrade had happened.
#[doc(hidden)]
pub async fn cancel_downgrade_at_every_poll<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-cancel-downgrade");
    for n in 0..MAX_POLLS {
        let g = lock.acquire(&k, WAIT).await.unwrap();
        let out = poll_n_then_drop(g.downgrade(), n, IDLE).await;
        let done = out.is_some();
        if let Some(g) = out {
            let g = g.expect("downgrade");
            assert_eq!(g.mode(), LockMode::Shared);
            g.release().await.unwrap();
        }
        assert_left_nothing(lock, observer, &k).await;
        if done {
            return;
        }
    }
    panic!("downgrade did not complete within {MAX_POLLS} polls");
}

/// `release_all` releases shared holds too, and their guards see a loss.
#[doc(hidden)]
pub async fn release_all_counts_shared_holds<L: SharedConformant>(lock: &L, observer: &L) {
    let (k1, k2) = (key("rw-all-1"), key("rw-all-2"));
    let a = shared(lock, &k1).await;
    let b = shared(lock, &k1).await;
    let c = lock.acquire(&k2, WAIT).await.unwrap();
    assert_eq!(lock.held_lock_count(), 3);
    assert_eq!(lock.release_all().await.unwrap(), 3);
    assert_eq!(lock.held_lock_count(), 0);
    for g in [&a, &b, &c] {
        eventually("the guard sees the loss", SETTLE, || g.is_lost()).await;
    }
    assert_becomes_free(observer, &k1).await;
    assert_becomes_free(observer, &k2).await;
}

/// A shared guard turned manual is released by key.
#[doc(hidden)]
pub async fn manual_shared_hold_releases_by_key<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-manual");
    let info = shared(lock, &k).await.into_manual();
    assert_eq!(info.mode, LockMode::Shared);
    assert!(!free_for(observer, &k).await);
    lock.release(&k).await.unwrap();
    assert_becomes_free(observer, &k).await;
    let again = "a second release(key) of a released manual shared hold returned Ok";
    assert!(expect_err(lock.release(&k).await, again).is_not_held());
}

/// Downgrading a guard whose lock `release_all` took away is a lock-lost
/// error, and leaves nothing held.
#[doc(hidden)]
pub async fn downgrade_of_a_lost_lock_is_lock_lost<L: SharedConformant>(lock: &L, observer: &L) {
    let k = key("rw-lost-downgrade");
    let guard = lock.acquire(&k, WAIT).await.unwrap();
    assert_eq!(lock.release_all().await.unwrap(), 1);
    match guard.downgrade().await {
        Ok(_) => panic!("a lock taken by release_all was downgraded"),
        Err(err) => assert!(err.is_lock_lost(), "{err:?}"),
    }
    assert_left_nothing(lock, observer, &k).await;
}
