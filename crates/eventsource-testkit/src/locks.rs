//! The lock conformance suite.
//!
//! Every implementation of [`DistributedLock`] + [`LockRegistry`] must pass
//! it. One macro call generates one `#[tokio::test]` per case:
//!
//! ```no_run
//! use eventsource::InMemoryLockManager;
//!
//! eventsource_testkit::lock_conformance_tests!(|| async {
//!     let primary = InMemoryLockManager::new(Some("t".into()));
//!     let observer = primary.clone();
//!     (primary, observer, ())
//! });
//! ```
//!
//! The factory returns two managers over the same lock space: `primary`,
//! which every case exercises, and `observer`, which must exclude against
//! it (for PostgreSQL, a second manager on the same database; for the
//! in-memory manager, a clone). The third value is kept alive until the
//! case ends (e.g. the case's own test database). The case functions are
//! public for the macro and hidden from the docs; each one's comment in the
//! source says what it checks. Cases use `observer` to check from outside
//! that a lock is really free or really held. The calling crate needs
//! `tokio` (features `macros`, `rt-multi-thread`) as a dev-dependency.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;

use eventsource::{lock_id_for_key, DistributedLock, Error, LockRegistry};

mod fence_cases;
mod shared_cases;
pub use fence_cases::*;
pub use shared_cases::*;

/// What a conformance case needs of an implementation.
pub trait Conformant: DistributedLock + LockRegistry + Clone + Send + Sync + 'static {}
impl<T: DistributedLock + LockRegistry + Clone + Send + Sync + 'static> Conformant for T {}

/// Generates one `#[tokio::test]` per conformance case; see the module docs.
#[macro_export]
macro_rules! lock_conformance_tests {
    ($make:expr) => {
        $crate::__lock_conformance_cases!($make;
            acquire_yields_info_for_the_key,
            is_held_inside_and_outside_the_scope,
            error_in_scope_releases_and_propagates,
            dropped_guard_releases,
            panic_in_scope_releases,
            aborted_task_releases,
            try_acquire_free_then_held,
            release_makes_key_acquirable,
            release_of_never_held_key_is_not_held_error,
            timeout_on_held_key_carries_the_timeout,
            zero_timeout_makes_one_attempt,
            different_keys_are_independent,
            release_all_returns_count_and_empties,
            into_manual_then_release_by_key,
            with_lock_returns_value_and_releases,
            empty_key_is_allowed_and_huge_key_rejected,
            handovers_between_tasks_keep_counts_exact,
            waiter_gets_lock_after_release,
            many_tasks_distinct_keys,
            cancel_acquire_at_every_poll,
            cancel_try_acquire_at_every_poll,
            cancel_release_at_every_poll,
            cancel_contended_acquire_at_every_poll,
            timeouts_racing_handovers_leave_the_key_free,
            fences_increase_on_every_path,
            fences_are_per_key_and_never_repeat,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __lock_conformance_cases {
    ($make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, _keep) = ($make)().await;
                $crate::locks::$case(&primary, &observer).await;
            }
        )*
    };
}

pub(crate) fn key(case: &str) -> String {
    format!("conformance:{case}:{}", uuid::Uuid::new_v4())
}

/// Waits until `cond` holds, checking every few milliseconds; panics after
/// `limit` (a generous bound for background work, not a timing assertion).
///
/// # Cancel safety
///
/// Cancel safe: it only checks and sleeps; dropping it loses nothing.
pub async fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Like [`eventually`], for an asynchronous condition (e.g. a query).
///
/// # Cancel safety
///
/// Cancel safe, as [`eventually`]: it only checks and sleeps.
pub async fn eventually_async<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub(crate) const SETTLE: Duration = Duration::from_secs(10);

/// True when `observer` can take `key` right now (and gives it back).
pub(crate) async fn free_for<L: Conformant>(observer: &L, key: &str) -> bool {
    match observer
        .try_acquire(key)
        .await
        .expect("observer try_acquire")
    {
        Some(_) => {
            observer.release(key).await.expect("observer release");
            true
        }
        None => false,
    }
}

pub(crate) async fn assert_becomes_free<L: Conformant>(observer: &L, key: &str) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        if free_for(observer, key).await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "key {key} never became free"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

struct NotifyWaker(Notify);
impl Wake for NotifyWaker {
    fn wake(self: Arc<Self>) {
        self.0.notify_one();
    }
}

/// Polls `fut` up to `n` times, each time after it asked to be woken (or
/// after `idle` without a wake-up), then drops it. Returns its output if it
/// completed within `n` polls.
///
/// # Cancel safety
///
/// Cancel safe: it holds `fut` only, which is dropped with it.
pub async fn poll_n_then_drop<F: Future>(fut: F, n: usize, idle: Duration) -> Option<F::Output> {
    let notify = Arc::new(NotifyWaker(Notify::new()));
    let waker = Waker::from(notify.clone());
    let mut fut = std::pin::pin!(fut);
    for i in 0..n {
        let mut cx = Context::from_waker(&waker);
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        if i + 1 < n {
            let _ = tokio::time::timeout(idle, notify.0.notified()).await;
        }
    }
    None
}

/// The lock carries the requested key, its derived id and a recent time.
#[doc(hidden)]
pub async fn acquire_yields_info_for_the_key<L: Conformant>(lock: &L, _observer: &L) {
    let k = key("info");
    let before = chrono::Utc::now();
    let guard = lock
        .acquire(&k, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(guard.info().key, k);
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

/// `try_acquire` takes a free key and answers `None` for a held one.
#[doc(hidden)]
pub async fn try_acquire_free_then_held<L: Conformant>(lock: &L, observer: &L) {
    let k = key("try");
    let info = lock.try_acquire(&k).await.unwrap().expect("free key");
    assert_eq!(info.key, k);
    assert!(
        lock.try_acquire(&k).await.unwrap().is_none(),
        "second local owner"
    );
    assert!(
        observer.try_acquire(&k).await.unwrap().is_none(),
        "observer got it"
    );
    lock.release(&k).await.unwrap();
}

/// After `release`, the key can be taken again.
#[doc(hidden)]
pub async fn release_makes_key_acquirable<L: Conformant>(lock: &L, observer: &L) {
    let k = key("reacquire");
    lock.try_acquire(&k).await.unwrap().unwrap();
    lock.release(&k).await.unwrap();
    assert!(!lock.is_held(&k));
    assert!(free_for(observer, &k).await);
    assert!(lock.try_acquire(&k).await.unwrap().is_some());
    lock.release(&k).await.unwrap();
}

/// Releasing a key never held is a not-held error naming the key.
#[doc(hidden)]
pub async fn release_of_never_held_key_is_not_held_error<L: Conformant>(lock: &L, _o: &L) {
    let k = key("never");
    let err = lock.release(&k).await.unwrap_err();
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
    let err = lock.acquire(&k, Some(t)).await.unwrap_err();
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
    let err = lock.acquire(&k, Some(Duration::ZERO)).await.unwrap_err();
    assert!(err.is_timeout());
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
        lock.try_acquire(k).await.unwrap().unwrap();
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
    assert_eq!(info.key, k);
    assert!(lock.is_held(&k));
    assert!(!free_for(observer, &k).await);
    lock.release(&k).await.unwrap();
    assert!(free_for(observer, &k).await);
    assert!(lock.release(&k).await.unwrap_err().is_not_held());
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
    let err = lock.acquire(&huge, None).await.unwrap_err();
    assert!(matches!(
        err.as_lock_acquisition().map(|e| &e.reason),
        Some(eventsource::AcquireFailure::KeyTooLong { .. })
    ));
    assert!(lock.try_acquire(&huge).await.is_err());
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

pub(crate) const MAX_POLLS: usize = 64;
pub(crate) const IDLE: Duration = Duration::from_millis(50);

/// An uncontended `acquire` dropped after every possible number of polls
/// leaks nothing.
#[doc(hidden)]
pub async fn cancel_acquire_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-acquire");
    for n in 0..MAX_POLLS {
        let out = poll_n_then_drop(lock.acquire(&k, None), n, IDLE).await;
        let done = out.is_some();
        if let Some(g) = out {
            g.unwrap().release().await.unwrap();
        }
        assert_becomes_free(observer, &k).await;
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        if done {
            return;
        }
    }
    panic!("acquire did not complete within {MAX_POLLS} polls");
}

/// `try_acquire` dropped after every possible number of polls leaks nothing.
#[doc(hidden)]
pub async fn cancel_try_acquire_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-try");
    for n in 0..MAX_POLLS {
        let out = poll_n_then_drop(lock.try_acquire(&k), n, IDLE).await;
        let done = out.is_some();
        if let Some(info) = out {
            // A dropped attempt from the previous round may still be in
            // flight; the key is then briefly "being taken".
            if info.unwrap().is_some() {
                lock.release(&k).await.unwrap();
            }
        }
        assert_becomes_free(observer, &k).await;
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        if done {
            return;
        }
    }
    panic!("try_acquire did not complete within {MAX_POLLS} polls");
}

/// `release` dropped after every possible number of polls still releases.
#[doc(hidden)]
pub async fn cancel_release_at_every_poll<L: Conformant>(lock: &L, observer: &L) {
    let k = key("cancel-release");
    for n in 0..MAX_POLLS {
        lock.try_acquire(&k).await.unwrap().unwrap();
        let out = poll_n_then_drop(lock.release(&k), n, IDLE).await;
        if let Some(r) = &out {
            assert!(r.is_ok(), "{r:?}");
        }
        assert_becomes_free(observer, &k).await;
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        assert!(!lock.is_held(&k));
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
        assert_becomes_free(observer, &k).await;
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
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
