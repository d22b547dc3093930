//! The lock conformance suite.
//!
//! Every implementation of [`DistributedLock`] + [`LockRegistry`] must pass
//! it. One macro call generates one `#[tokio::test]` per case:
//!
//! ```no_run
//! use pgcoord::InMemoryLockManager;
//! use pgcoord_testkit::locks::Fencing;
//!
//! pgcoord_testkit::lock_conformance_tests!(fencing: Fencing::Tokens, || async {
//!     let primary = InMemoryLockManager::new(Some("t".into()));
//!     let observer = primary.clone();
//!     (primary, observer, ())
//! });
//! ```
//!
//! `fencing:` says whether the implementation hands out fencing tokens
//! ([`Fencing::Tokens`], [`Fencing::NoTokens`]); the fence cases hold it
//! to that, so a fencing implementation that stops issuing tokens fails.
//! The factory returns two managers over the same lock space: `primary`,
//! which every case exercises, and `observer`, which must exclude against
//! it (for PostgreSQL, a second manager on the same database; for the
//! in-memory manager, a clone). The third value is kept alive until the
//! case ends (e.g. the case's own test database). The case functions are
//! public for the macro and hidden from the docs (in `locks/cases.rs`,
//! `locks/cancel_cases.rs`, `locks/drop_cases.rs`, `locks/fence_cases.rs`,
//! `locks/loss_cases.rs`; this file keeps the macros and the helpers they share); each one's
//! comment in the source says what it checks. Cases use `observer` to
//! check from outside that a lock is really free or really held. The loss
//! cases take locks away with `release_all`, the one way to lose a lock
//! that every implementation offers. Each case runs under
//! [`hang_guard::CASE_LIMIT`](crate::hang_guard::CASE_LIMIT): a case still
//! running after two minutes (an implementation that never gives up a
//! wait, say) fails with its name instead of hanging the run; the factory
//! runs outside that limit. The calling crate needs `tokio` (features
//! `macros`, `rt-multi-thread`) as a dev-dependency.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;

use pgcoord::{DistributedLock, LockRegistry};

mod cancel_cases;
mod cases;
mod drop_cases;
mod fence_cases;
mod loss_cases;
mod shared_cases;
mod yield_cases;
pub use cancel_cases::*;
pub use cases::*;
pub use drop_cases::*;
pub use fence_cases::*;
pub use loss_cases::*;
pub use shared_cases::*;
pub use yield_cases::*;

/// What a conformance case needs of an implementation.
pub trait Conformant: DistributedLock + LockRegistry + Clone + Send + Sync + 'static {}
impl<T: DistributedLock + LockRegistry + Clone + Send + Sync + 'static> Conformant for T {}

/// Generates one `#[tokio::test]` per conformance case; see the module docs.
#[macro_export]
macro_rules! lock_conformance_tests {
    (fencing: $fencing:expr, $make:expr $(,)?) => {
        $crate::__lock_conformance_cases!($make;
            acquire_yields_info_for_the_key,
            is_held_inside_and_outside_the_scope,
            error_in_scope_releases_and_propagates,
            dropped_guard_releases,
            dropped_key_is_free_to_the_same_manager_at_once,
            panic_in_scope_releases,
            aborted_task_releases,
            try_lock_free_then_held,
            try_lock_retried_on_a_held_key_yields_to_other_tasks,
            manual_lock_is_held_until_release,
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
            cancel_try_lock_at_every_poll,
            cancel_release_at_every_poll,
            cancel_contended_acquire_at_every_poll,
            timeouts_racing_handovers_leave_the_key_free,
            release_all_makes_a_live_guard_lost,
            with_lock_stops_the_work_when_the_lock_is_lost,
            releasing_a_manual_lock_fires_no_signal,
        );
        $crate::__lock_fence_cases!($fencing, $make;
            fences_increase_on_every_path,
            fences_are_per_key_and_never_repeat,
        );
    };
    ($make:expr) => {
        compile_error!(
            "say whether the implementation hands out fencing tokens: \
             `lock_conformance_tests!(fencing: Fencing::Tokens, || ...)` or `Fencing::NoTokens`"
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
                let case = $crate::locks::$case(&primary, &observer);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
            }
        )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __lock_fence_cases {
    ($fencing:expr, $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (primary, observer, _keep) = ($make)().await;
                let case = $crate::locks::$case(&primary, &observer, $fencing);
                $crate::hang_guard::within(stringify!($case), $crate::hang_guard::CASE_LIMIT, case)
                    .await;
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
        .try_lock(key)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .expect("observer try_lock")
    {
        Some(_) => {
            observer.release(key).await.expect("observer release");
            true
        }
        None => false,
    }
}

pub(crate) async fn assert_becomes_free<L: Conformant>(observer: &L, key: &str) {
    assert!(
        becomes_free(observer, key).await,
        "key {key} never became free"
    );
}

/// Whether `observer` can take `key` within [`SETTLE`] (and gives it back).
pub(crate) async fn becomes_free<L: Conformant>(observer: &L, key: &str) -> bool {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !free_for(observer, key).await {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    true
}

/// The error of `result`; when it is `Ok`, the case fails with `what` (what
/// the implementation did instead of failing).
#[track_caller]
pub(crate) fn expect_err<T>(result: pgcoord::Result<T>, what: &str) -> pgcoord::Error {
    match result {
        Ok(_) => panic!("{what}"),
        Err(e) => e,
    }
}

/// The guard of a `try_lock` (or `acquire`) that must have taken a free
/// key; otherwise the case fails saying what `call` did instead.
#[track_caller]
pub(crate) fn expect_taken(
    result: pgcoord::Result<Option<pgcoord::LockGuard>>,
    call: &str,
) -> pgcoord::LockGuard {
    match result {
        Ok(Some(guard)) => guard,
        Ok(None) => panic!("{call} of a free key returned None (held elsewhere)"),
        Err(e) => panic!("{call} of a free key failed: {e}"),
    }
}

/// After a round of a cancellation case: `key` becomes free for
/// `observer`, and `lock` holds nothing any more.
pub(crate) async fn assert_left_nothing<L: Conformant>(lock: &L, observer: &L, key: &str) {
    assert_becomes_free(observer, key).await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// Drops the call `make()` builds after 0, 1, 2, ... polls, until one
/// round completes it (`MAX_POLLS` at most): `settle` gives back what a
/// completed call took, and after every round the key must be free and
/// `lock` hold nothing.
pub(crate) async fn drop_at_every_poll<L, F, T, S, G>(
    what: &str,
    lock: &L,
    observer: &L,
    key: &str,
    mut make: impl FnMut() -> F,
    mut settle: S,
) where
    L: Conformant,
    F: Future<Output = T>,
    S: FnMut(T) -> G,
    G: Future<Output = ()>,
{
    for n in 0..MAX_POLLS {
        let out = poll_n_then_drop(make(), n, IDLE).await;
        let done = out.is_some();
        if let Some(out) = out {
            settle(out).await;
        }
        assert_left_nothing(lock, observer, key).await;
        if done {
            return;
        }
    }
    panic!("{what} did not complete within {MAX_POLLS} polls");
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

pub(crate) const MAX_POLLS: usize = 64;
pub(crate) const IDLE: Duration = Duration::from_millis(50);
