//! The cancellation cases of the lock conformance suite: every call dropped
//! at every poll leaks nothing, and timeouts racing handovers leave the key
//! free ([`lock_conformance_tests!`](crate::lock_conformance_tests)).

use std::sync::Arc;
use std::time::Duration;

use super::{
    assert_left_nothing, becomes_free, drop_at_every_poll, eventually, eventually_async,
    expect_taken, free_for, key, poll_n_then_drop, Conformant, IDLE, MAX_POLLS, SETTLE,
};

/// An uncontended `acquire` dropped after every possible number of polls
/// leaks nothing.
#[doc(hidden)]
pub async fn cancel_acquire_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-acquire");
    let acquire = || lock.acquire(&k, None);
    let release = |g: pgcoord::Result<pgcoord::LockGuard>| async {
        g.unwrap().release().await.unwrap();
    };
    drop_at_every_poll("acquire", lock, observer, &k, acquire, release).await;
}

/// `try_lock` dropped after every possible number of polls leaks nothing.
#[doc(hidden)]
pub async fn cancel_try_lock_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-try");
    let try_lock = || lock.try_lock(&k);
    let release = |guard: pgcoord::Result<Option<pgcoord::LockGuard>>| async {
        // A dropped attempt from the previous round may still be in
        // flight; the key is then briefly "being taken".
        if let Some(guard) = guard.unwrap() {
            guard.release().await.unwrap();
        }
    };
    drop_at_every_poll("try_lock", lock, observer, &k, try_lock, release).await;
}

/// `release` dropped after every possible number of polls still releases.
#[doc(hidden)]
pub async fn cancel_release_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-release");
    for n in 0..MAX_POLLS {
        expect_taken(lock.try_lock(&k).await, "try_lock").into_manual();
        let out = poll_n_then_drop(lock.release(&k), n, IDLE).await;
        if let Some(r) = &out {
            assert!(r.is_ok(), "release({k:?}) of a manual lock failed: {r:?}");
        }
        let done = match n {
            0 => "created and dropped without being polled".to_owned(),
            n => format!("dropped after {n} poll(s) without completing"),
        };
        let rule = "the trait's rule is that once `release` is called the release goes \
                    ahead even if its future is dropped; an `async fn release` that does \
                    nothing until polled breaks it (start the release before returning \
                    the future, e.g. send it to a task)";
        assert!(
            out.is_some() || becomes_free(observer, &k).await,
            "key {k} never became free for another manager (waited {SETTLE:?}): the future of \
             the manual `release({k:?})` was {done}; {rule}"
        );
        eventually(
            &format!("the manager's count back to 0 after the `release` future was {done}; {rule}"),
            SETTLE,
            || lock.held_lock_count() == 0,
        )
        .await;
        assert_left_nothing(lock, observer, &k).await;
        assert!(
            !lock.is_held(&k),
            "is_held({k:?}) after its release went ahead"
        );
        if out.is_some() {
            return;
        }
    }
    panic!("release did not complete within {MAX_POLLS} polls");
}

/// A contended `acquire` dropped while waiting leaves no waiter behind that
/// could take (and keep) the lock later.
#[doc(hidden)]
pub async fn cancel_contended_acquire_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-wait");
    for n in 1..8 {
        let holder = observer.acquire(&k, None).await.unwrap();
        let out = poll_n_then_drop(lock.acquire(&k, None), n, IDLE).await;
        assert!(out.is_none(), "a wait for a held key ended: {out:?}");
        holder.release().await.unwrap();
        assert_left_nothing(lock, observer, &k).await;
        assert!(!lock.is_held(&k));
    }
}

/// Short timeouts racing fast hand-overs (a server may grant a wait and
/// still report its timeout): once everything is released, nothing of the
/// primary holds the key and the observer takes it.
#[doc(hidden)]
pub async fn timeouts_racing_handovers_leave_the_key_free<L: Conformant>(lock: &L, observer: &L) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let k = key("timeout-race");
    let stop = Arc::new(AtomicBool::new(false));
    let cycler = {
        let (observer, k, stop) = (observer.clone(), k.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let g = observer
                    .acquire(&k, Some(Duration::from_secs(30)))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_micros(i % 1500)).await;
                g.release().await.unwrap();
                i += 433;
            }
        })
    };
    let mut racers = Vec::new();
    for r in 0..3u64 {
        let (lock, k) = (lock.clone(), k.clone());
        racers.push(tokio::spawn(async move {
            for n in 0..60u64 {
                let t = Duration::from_micros(1000 + ((n + r) * 7919) % 2000);
                if let Ok(g) = lock.acquire(&k, Some(t)).await {
                    g.release().await.unwrap();
                }
            }
        }));
    }
    for r in racers {
        r.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    cycler.await.unwrap();
    eventually("the primary holds nothing", SETTLE, || {
        lock.held_lock_count() == 0
    })
    .await;
    eventually_async("the observer takes the key", || async {
        free_for(observer, &k).await
    })
    .await;
}
