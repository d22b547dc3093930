//! [`PostgresLockManager`] as the lock ports ([`DistributedLock`],
//! [`LockRegistry`]).
//!
//! Each call checks the key, runs the [`Acquirer`](super::acquirer), wraps
//! the outcome in the port's types (guards, infos, errors carrying the key
//! and the timeout) and emits the `tracing` span. Nothing below this file
//! knows about keys as error context.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::lock_settle::{acquisition, mark_failed};
use super::lock_span::lock_span;
use super::manager::PostgresLockManager;
use super::metrics::{Operation, Outcome};
use crate::ports::error::{Error, LockNotHeldError, Result};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{DistributedLock, GuardBackend, LockGuard, LockMode, LockRegistry};

impl DistributedLock for PostgresLockManager {
    /// Acquires `key`: first a try-lock on a batched session; if another
    /// session holds the key, a fair wait in the key's wait line and inside
    /// PostgreSQL, bounded by `timeout` (which also bounds connecting).
    /// `Some(Duration::ZERO)` makes exactly one attempt.
    ///
    /// However short `timeout` is, the first attempt is given until the
    /// deadline or the liveness timeout (default 2 s), whichever is later,
    /// to be answered, connecting included: a free key is granted, a key
    /// held elsewhere is [`AcquireFailure::Timeout`], as with `Some(ZERO)`.
    ///
    /// Only a server silent for that long is an
    /// [`AcquireFailure::Backend`] error of kind
    /// [`BackendErrorKind::NoAnswer`](crate::error::BackendErrorKind::NoAnswer)
    /// ("the server did not answer"), never [`AcquireFailure::Timeout`]
    /// (which means the key was held elsewhere and not granted in time).
    ///
    /// [`AcquireFailure::Timeout`]: crate::error::AcquireFailure::Timeout
    /// [`AcquireFailure::Backend`]: crate::error::AcquireFailure::Backend
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped at any await point: no lock stays held and
    /// no session is left waiting. A server-side wait nobody wants is
    /// cancelled, or, when its own `lock_timeout` ends within 50 ms, left to
    /// end by itself (a cancel costs a connection); a grant that raced the
    /// drop, or came in those 50 ms, is released within about a round trip,
    /// so another process may see the key held for that moment. Not cancel
    /// safe in tokio's sense: a dropped wait loses its place in the queue,
    /// as `tokio::sync::Semaphore::acquire` does.
    fn acquire(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<LockGuard>> + Send {
        let (address, port) = &self.ctx().server;
        let span = lock_span!(
            "eventsource.lock.acquire",
            "acquire",
            &*crate::ports::key_limit::shown_key(key),
            "server.address" = %address,
            "server.port" = port,
            "eventsource.lock.id" = tracing::field::Empty,
            "eventsource.lock.fence" = tracing::field::Empty,
            "eventsource.lock.wait_us" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        self.acquire_in(Operation::Acquire, LockMode::Exclusive, key, timeout)
            .instrument(span)
    }

    /// One try-lock, never waiting. `Ok(None)` when another session holds
    /// the key, or another task of this manager holds or is taking it.
    ///
    /// It first waits out this manager's own abandoned wait for the key
    /// (at most about 50 ms after a timed-out `acquire`), never losing to it,
    /// and the release of a guard of the key this manager has just dropped
    /// (one round trip): a key this manager let go of is free to it at once.
    /// Another process may still find it held for that round trip.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a lock taken for a dropped call is released at once, so
    /// calling again finds the key as it would have.
    fn try_lock(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<LockGuard>>> + Send {
        let (address, port) = &self.ctx().server;
        let span = lock_span!(
            "eventsource.lock.try_lock",
            "try_lock",
            &*crate::ports::key_limit::shown_key(key),
            "server.address" = %address,
            "server.port" = port,
            "eventsource.lock.id" = tracing::field::Empty,
            "eventsource.lock.fence" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        async move {
            let started = Instant::now();
            let zero = Some(Duration::ZERO);
            let lock_id = match checked_lock_id(key, zero) {
                Ok(id) => id,
                Err(e) => return Err(self.refused(Operation::TryLock, key, Some(started), e)),
            };
            tracing::Span::current().record("eventsource.lock.id", lock_id);
            let key_arc: Arc<str> = Arc::from(key);
            // A key this manager holds is answered without I/O: a loop of
            // tries must still give the runtime's other tasks their turn.
            tokio::task::consume_budget().await;
            let r = match self.state.acquirer.try_once(lock_id, &key_arc).await {
                Ok(Some(g)) => Ok(Some(self.guard(key, lock_id, g))),
                Ok(None) => Ok(None),
                Err(failure) => Err(acquisition(key, failure, zero)),
            };
            let (outcome, counted) = match &r {
                Ok(Some(_)) => ("acquired", Outcome::Granted),
                Ok(None) => ("held_elsewhere", Outcome::Contended),
                Err(_) => ("error", Outcome::Error),
            };
            self.record(Operation::TryLock, counted, started.elapsed(), key);
            let span = tracing::Span::current();
            span.record("eventsource.lock.outcome", outcome);
            match &r {
                Ok(Some(g)) => {
                    if let Some(fence) = g.fence() {
                        span.record("eventsource.lock.fence", fence);
                    }
                }
                Ok(None) => {}
                Err(e) => mark_failed(e),
            }
            tracing::debug!(outcome, "try_lock finished");
            r
        }
        .instrument(span)
    }

    /// Releases a manual lock and waits for the server's confirmation.
    ///
    /// # Cancel safety
    ///
    /// Once called, the release goes ahead even if the future is dropped;
    /// only its outcome is lost (calling again reports the key not held).
    fn release(&self, key: &str) -> impl std::future::Future<Output = Result<()>> + Send {
        let lock_id = crate::lock_id_for_key(key);
        let span = lock_span!(
            "eventsource.lock.release",
            "release",
            &*crate::ports::key_limit::shown_key(key),
            "eventsource.lock.id" = lock_id,
        );
        let held = self.ctx().holdings.take_manual(lock_id, key);
        async move {
            let r = match held {
                Some(lock) => Box::new(lock).release().await,
                None => Err(Error::LockNotHeld(LockNotHeldError::new(key))),
            };
            let outcome = if r.is_ok() { "released" } else { "error" };
            tracing::Span::current().record("eventsource.lock.outcome", outcome);
            tracing::debug!(outcome, "release finished");
            r
        }
        .instrument(span)
    }

    /// The first free key of `keys`, in order, tried in **one statement**
    /// on one batched session (`LIMIT 1` stops at the first successful
    /// try-lock, so no later key is taken). Keys this manager holds or is
    /// taking are skipped. A fencing or single-session manager tries the
    /// keys one by one instead (each fenced grant needs its increment).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (it never queues): a lock taken for a dropped call is
    /// released at once, so calling again finds the keys as they were.
    async fn try_lock_any(&self, keys: &[&str]) -> Result<Option<(usize, LockGuard)>> {
        self.try_lock_any_in(keys).await
    }

    /// Whether this manager holds `key` now, in either mode. A lock whose
    /// session has ended is not held from the moment its loss signal
    /// fires.
    fn is_held(&self, key: &str) -> bool {
        let lock_id = crate::lock_id_for_key(key);
        self.ctx().holdings.is_held(lock_id)
    }

    /// True when built with `fencing(true)`.
    fn fences(&self) -> bool {
        self.ctx().settings.fencing
    }
}

impl LockRegistry for PostgresLockManager {
    /// Releases every lock this manager holds, shared holds included;
    /// guards still alive see their lock as lost.
    ///
    /// # Cancel safety
    ///
    /// The unlocks are sent before the first await; dropping the future
    /// loses only the count.
    fn release_all(&self) -> impl std::future::Future<Output = Result<usize>> + Send {
        self.release_all_in()
    }

    /// Locks held in either mode (each shared hold counts once). As for
    /// [`is_held`](DistributedLock::is_held), a lock whose session has
    /// ended is not counted from the moment its loss signal fires, though
    /// its guard may still be alive.
    fn held_lock_count(&self) -> usize {
        self.ctx().holdings.held()
    }
}
