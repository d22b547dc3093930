//! Cases for `try_lock_any` and `acquire_many`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgcoord::coordination::acquire_many;
use pgcoord::{error::AcquireFailure, lock_id_for_key};

use crate::locks::{
    assert_becomes_free, eventually, expect_err, expect_taken, free_for, key, poll_n_then_drop,
    Conformant, SETTLE,
};

const MAX_POLLS: usize = 64;
const IDLE: Duration = Duration::from_millis(50);
const LONG: Option<Duration> = Some(Duration::from_secs(60));
/// What an `acquire_many` that returned a set with a key held elsewhere means.
const HELD_KEY_GRANTED: &str = "acquire_many returned a set although another manager holds one \
    of its keys: the implementation's try_lock or acquire granted a held key";

/// `n` fresh keys, sorted in canonical order (by lock id).
fn canonical_keys(case: &str, n: usize) -> Vec<String> {
    let mut keys: Vec<String> = (0..n).map(|i| key(&format!("{case}-{i}"))).collect();
    keys.sort_by_key(|k| lock_id_for_key(k));
    keys
}

fn refs(keys: &[String]) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

/// `try_lock_any` returns the first free key of the list, holding only it.
#[doc(hidden)]
pub async fn try_lock_any_takes_the_first_free_key<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("any", 3);
    let held = expect_taken(observer.try_lock(&keys[0]).await, "try_lock");
    // The observer may be the same manager (in-memory): count from here.
    let before = lock.held_lock_count();
    let (i, guard) = lock
        .try_lock_any(&refs(&keys))
        .await
        .unwrap()
        .expect("a free key");
    assert_eq!((i, guard.key()), (1, keys[1].as_str()));
    assert_eq!(
        lock.held_lock_count(),
        before + 1,
        "more than one key taken"
    );
    assert!(free_for(observer, &keys[2]).await, "a later key was kept");
    // Held by this manager now: the next call moves on to the last key.
    let (j, second) = lock.try_lock_any(&refs(&keys)).await.unwrap().unwrap();
    assert_eq!(j, 2);
    guard.release().await.unwrap();
    second.release().await.unwrap();
    assert_eq!(lock.held_lock_count(), before);
    held.release().await.unwrap();
}

/// All held (or no keys at all): `Ok(None)`, nothing taken.
#[doc(hidden)]
pub async fn try_lock_any_is_none_when_all_are_held<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("any-none", 3);
    let mut held = Vec::new();
    for k in &keys {
        held.push(expect_taken(observer.try_lock(k).await, "try_lock"));
    }
    let before = lock.held_lock_count();
    assert!(lock.try_lock_any(&refs(&keys)).await.unwrap().is_none());
    assert!(lock.try_lock_any(&[]).await.unwrap().is_none());
    assert_eq!(lock.held_lock_count(), before);
    for g in held {
        g.release().await.unwrap();
    }
}

/// A key over the limit, once reached, is an error, and nothing is held.
#[doc(hidden)]
pub async fn try_lock_any_stops_at_a_too_long_key<L: Conformant>(lock: &L, observer: &L) {
    let k = key("any-long");
    let held = expect_taken(observer.try_lock(&k).await, "try_lock");
    let huge = "k".repeat((1 << 20) + 1);
    let before = lock.held_lock_count();
    let what = "try_lock_any of [a held key, a key longer than MAX_KEY_LEN] returned Ok";
    let err = expect_err(lock.try_lock_any(&[&k, &huge]).await, what);
    assert!(
        matches!(
            err.as_lock_acquisition().map(|e| &e.reason),
            Some(AcquireFailure::KeyTooLong { .. })
        ),
        "try_lock_any must fail on a too-long key with AcquireFailure::KeyTooLong: {err:?}"
    );
    assert_eq!(lock.held_lock_count(), before);
    held.release().await.unwrap();
}

/// `try_lock_any` dropped after every possible number of polls leaks nothing.
#[doc(hidden)]
pub async fn cancel_try_lock_any_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("any-cancel", 3);
    let held = expect_taken(observer.try_lock(&keys[0]).await, "try_lock");
    let before = lock.held_lock_count();
    for n in 0..MAX_POLLS {
        let list = refs(&keys);
        let out = poll_n_then_drop(lock.try_lock_any(&list), n, IDLE).await;
        let done = out.is_some();
        drop(out);
        for k in &keys[1..] {
            assert_becomes_free(observer, k).await;
        }
        eventually("count back", SETTLE, || lock.held_lock_count() == before).await;
        if done {
            held.release().await.unwrap();
            return;
        }
    }
    panic!("try_lock_any did not complete within {MAX_POLLS} polls");
}

/// Every distinct key once, in canonical order; all released by `release`.
#[doc(hidden)]
pub async fn acquire_many_takes_every_key_once_in_canonical_order<L: Conformant>(
    lock: &L,
    observer: &L,
) {
    let keys = canonical_keys("many", 5);
    let mut asked: Vec<&str> = refs(&keys);
    asked.reverse();
    asked.push(&keys[2]); // a duplicate
    let set = acquire_many(lock, &asked, LONG).await.unwrap();
    assert_eq!(set.keys().collect::<Vec<_>>(), refs(&keys));
    assert_eq!(set.len(), 5);
    assert_eq!(lock.held_lock_count(), 5);
    for k in &keys {
        assert!(
            lock.is_held(k) && !free_for(observer, k).await,
            "{k} not held"
        );
    }
    assert!(!set.is_lost());
    set.release().await.unwrap();
    assert_eq!(lock.held_lock_count(), 0);
    for k in &keys {
        assert!(free_for(observer, k).await, "{k} still held");
    }
}

/// The empty set: an empty guard, nothing held.
#[doc(hidden)]
pub async fn acquire_many_of_nothing_is_an_empty_guard<L: Conformant>(lock: &L, _o: &L) {
    let none: [&str; 0] = [];
    let set = acquire_many(lock, &none, Some(Duration::ZERO))
        .await
        .unwrap();
    assert!(set.is_empty() && !set.is_lost());
    set.release().await.unwrap();
    assert_eq!(lock.held_lock_count(), 0);
}

/// Right after a failed `acquire_many` returns: `lock` holds none of the
/// set and `observer` takes each key of it (but `missing`) at once, with
/// no waiting for a release in the background.
async fn assert_free_at_once<L: Conformant>(
    lock: &L,
    observer: &L,
    keys: &[String],
    missing: usize,
) {
    // `missing` is the observer's (and, for a clone of `lock`, `lock`'s).
    let others = keys.iter().enumerate().filter(|(i, _)| *i != missing);
    let held = others
        .filter(|(_, k)| lock.is_held(k))
        .map(|(_, k)| k)
        .collect::<Vec<_>>();
    assert!(
        held.is_empty(),
        "acquire_many returned its error while still holding {held:?}: the keys taken \
         before the failure must be released before the error is returned"
    );
    for (i, k) in keys.iter().enumerate() {
        if i != missing {
            let free = free_for(observer, k).await;
            assert!(
                free,
                "right after acquire_many failed, another manager could not take {k}"
            );
        }
    }
}

/// A timeout names the missing key and the whole timeout; nothing stays
/// held, already when the error returns.
#[doc(hidden)]
pub async fn acquire_many_timeout_leaves_nothing_held<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("many-timeout", 5);
    let held = expect_taken(observer.try_lock(&keys[2]).await, "try_lock");
    // Connected first: a deadline that passes before the server answered
    // at all is not "held elsewhere".
    if let Some(warm) = lock.try_lock(&key("warm")).await.unwrap() {
        warm.release().await.unwrap();
    }
    let before = lock.held_lock_count();
    let t = Duration::from_millis(150);
    let err = expect_err(acquire_many(lock, &keys, Some(t)).await, HELD_KEY_GRANTED);
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(err.key(), Some(keys[2].as_str()));
    assert_eq!(err.as_lock_acquisition().unwrap().timeout, Some(t));
    assert_eq!(lock.held_lock_count(), before, "held after the timeout");
    assert_free_at_once(lock, observer, &keys, 2).await;
    held.release().await.unwrap();
}

/// A zero timeout makes one attempt of the whole set.
#[doc(hidden)]
pub async fn acquire_many_zero_timeout_makes_one_attempt<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("many-zero", 4);
    let held = expect_taken(observer.try_lock(&keys[3]).await, "try_lock");
    let before = lock.held_lock_count();
    let err = expect_err(
        acquire_many(lock, &keys, Some(Duration::ZERO)).await,
        HELD_KEY_GRANTED,
    );
    assert!(
        err.is_timeout() && err.key() == Some(keys[3].as_str()),
        "{err:?}"
    );
    assert_eq!(lock.held_lock_count(), before, "held after the timeout");
    assert_free_at_once(lock, observer, &keys, 3).await;
    held.release().await.unwrap();
    let set = acquire_many(lock, &keys, Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(set.len(), 4);
    set.release().await.unwrap();
}

/// While it waits for a held key, the caller holds exactly the keys below
/// it in canonical order; once the key is released it holds the whole set.
#[doc(hidden)]
pub async fn acquire_many_waits_holding_only_keys_below_the_missing_one<L: Conformant>(
    lock: &L,
    observer: &L,
) {
    let keys = canonical_keys("many-wait", 5);
    let held = expect_taken(observer.try_lock(&keys[2]).await, "try_lock");
    let (l, ks) = (lock.clone(), keys.clone());
    let waiter = tokio::spawn(async move { acquire_many(&l, &ks, LONG).await });
    eventually("the keys below the missing one are held", SETTLE, || {
        lock.is_held(&keys[0]) && lock.is_held(&keys[1])
    })
    .await;
    // Given back before the wait, or never taken.
    for k in &keys[3..] {
        assert_becomes_free(observer, k).await;
    }
    assert!(!free_for(observer, &keys[0]).await);
    held.release().await.unwrap();
    let set = waiter.await.unwrap().unwrap();
    assert_eq!(set.keys().collect::<Vec<_>>(), refs(&keys));
    for k in &keys {
        assert!(!free_for(observer, k).await, "{k} not held");
    }
    set.release().await.unwrap();
    assert_eq!(lock.held_lock_count(), 0);
}

/// A too-long key fails the call before anything is taken.
#[doc(hidden)]
pub async fn acquire_many_refuses_a_too_long_key_holding_nothing<L: Conformant>(lock: &L, _o: &L) {
    let huge = "k".repeat((1 << 20) + 1);
    let k = key("many-long");
    let err = acquire_many(lock, &[k.as_str(), &huge], None)
        .await
        .unwrap_err();
    assert!(matches!(
        err.as_lock_acquisition().map(|e| &e.reason),
        Some(AcquireFailure::KeyTooLong { .. })
    ));
    assert_eq!(lock.held_lock_count(), 0);
}

/// Tasks of both managers take random overlapping sets: every call
/// finishes (no deadlock: a deadlock would leave a call waiting until its
/// generous timeout fails the test) and no key ever has two holders.
#[doc(hidden)]
pub async fn overlapping_sets_finish_and_exclude<L: Conformant>(lock: &L, observer: &L) {
    let keys = Arc::new(canonical_keys("many-overlap", 6));
    let inside: Arc<Vec<AtomicBool>> = Arc::new((0..6).map(|_| AtomicBool::new(false)).collect());
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let m = if t % 2 == 0 {
            lock.clone()
        } else {
            observer.clone()
        };
        let (keys, inside) = (keys.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
            for _ in 0..15 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // A random subset of 1 to 6 keys, asked in random order.
                let mut set: Vec<usize> = (0..6).filter(|i| seed >> i & 1 == 1).collect();
                if set.is_empty() {
                    set.push((seed % 6) as usize);
                }
                let turn = (seed >> 8) as usize % set.len();
                set.rotate_left(turn);
                let asked: Vec<&str> = set.iter().map(|&i| keys[i].as_str()).collect();
                let guard = acquire_many(&m, &asked, LONG).await.expect("no deadlock");
                for &i in &set {
                    assert!(
                        !inside[i].swap(true, Ordering::SeqCst),
                        "two holders of a key"
                    );
                }
                tokio::task::yield_now().await;
                for &i in &set {
                    inside[i].store(false, Ordering::SeqCst);
                }
                guard.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(lock.held_lock_count(), 0);
    assert_eq!(observer.held_lock_count(), 0);
}

/// An uncontended `acquire_many` dropped after every possible number of
/// polls leaves no key of the set held.
#[doc(hidden)]
pub async fn cancel_acquire_many_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("many-cancel", 4);
    for n in 0..MAX_POLLS {
        let out = poll_n_then_drop(acquire_many(lock, &keys, None), n, IDLE).await;
        let done = out.is_some();
        if let Some(set) = out {
            set.unwrap().release().await.unwrap();
        }
        for k in &keys {
            assert_becomes_free(observer, k).await;
        }
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        if done {
            return;
        }
    }
    panic!("acquire_many did not complete within {MAX_POLLS} polls");
}

/// A contended `acquire_many` dropped while it waits leaves no key held
/// and no waiter behind.
#[doc(hidden)]
pub async fn cancel_contended_acquire_many_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("many-cancel-wait", 4);
    for n in 1..12 {
        let held = expect_taken(observer.try_lock(&keys[1]).await, "try_lock");
        let out = poll_n_then_drop(acquire_many(lock, &keys, None), n, IDLE).await;
        assert!(out.is_none(), "a wait for a held key ended: {out:?}");
        held.release().await.unwrap();
        for k in &keys {
            assert_becomes_free(observer, k).await;
        }
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
    }
}

/// `MultiLockGuard::release` dropped after every possible number of polls
/// still releases every key of the set.
#[doc(hidden)]
pub async fn cancel_multi_release_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let keys = canonical_keys("many-cancel-release", 3);
    for n in 0..MAX_POLLS {
        let set = acquire_many(lock, &keys, LONG).await.unwrap();
        let out = poll_n_then_drop(set.release(), n, IDLE).await;
        if let Some(r) = &out {
            assert!(r.is_ok(), "{r:?}");
        }
        for k in &keys {
            assert_becomes_free(observer, k).await;
        }
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        if out.is_some() {
            return;
        }
    }
    panic!("release did not complete within {MAX_POLLS} polls");
}
