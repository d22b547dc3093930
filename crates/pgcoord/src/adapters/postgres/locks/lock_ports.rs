//! [`PostgresLockManager`] as the lock ports ([`DistributedLock`],
//! [`LockRegistry`]).
//!
//! Each call checks the key, runs the [`Acquirer`](super::acquirer), wraps
//! the outcome in the port's types (guards, infos, errors carrying the key
//! and the timeout) and emits the `tracing` span. Nothing below this file
//! knows about keys as error context.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;

use super::lock_span::{error_type, lock_span, outcome_name};
use super::manager::PostgresLockManager;
use super::metrics::{self, Outcome};
use super::session::Granted;
use crate::ports::error::{AcquireFailure, Error, LockAcquisitionError, LockNotHeldError, Result};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{
    DistributedLock, GuardBackend, LockGuard, LockMode, LockRegistry, LossSignal,
};

/// The port's error for a failed acquisition of `key`: the one place where
/// the key and the timeout are attached.
fn acquisition(key: &str, failure: AcquireFailure, timeout: Option<Duration>) -> Error {
    Error::LockAcquisition(LockAcquisitionError::new(key, failure, timeout))
}

impl PostgresLockManager {
    /// The guard of a grant: its info, and a loss signal that also watches
    /// the session's lease in lease mode.
    pub(super) fn guard(&self, key: &str, lock_id: i64, g: Granted) -> LockGuard {
        let info = self.info(lock_id, &g);
        // Moved, not cloned: the session's alarm is shared by all of its
        // locks, and each clone and drop of it is a write to one counter
        // that every worker thread touches.
        let Granted {
            lock,
            dead,
            loss,
            lease,
            ..
        } = g;
        let loss = LossSignal::from_alarms(dead, loss, lease);
        let prefixes = self.ctx().settings.key_prefixes.as_deref();
        let backend = super::metrics_per_key::wrap(prefixes, key, &loss, Box::new(lock));
        LockGuard::new(info, loss, backend)
    }

    /// An acquisition in either mode, inside the caller's span: the key's
    /// check, the acquirer's path for the mode, then [`settle`](Self::settle).
    pub(super) async fn acquire_in(
        &self,
        mode: LockMode,
        key: &str,
        timeout: Option<Duration>,
    ) -> Result<LockGuard> {
        // The clock is read only for what uses it: a deadline, the
        // metrics, a span that records the wait (two reads a lock were a
        // few percent of the client's work at 1,024 tasks).
        let span = tracing::Span::current();
        let timed = timeout.is_some() || cfg!(feature = "metrics") || !span.is_disabled();
        let started = timed.then(Instant::now);
        let lock_id = checked_lock_id(key, timeout)?;
        span.record("eventsource.lock.id", lock_id);
        let key_arc: Arc<str> = Arc::from(key);
        let acquirer = &self.state.acquirer;
        let (operation, granted) = match mode {
            LockMode::Exclusive => (
                "acquire",
                acquirer.acquire(lock_id, &key_arc, timeout, started).await,
            ),
            LockMode::Shared => (
                "acquire_shared",
                acquirer.acquire_shared(lock_id, &key_arc, timeout).await,
            ),
        };
        let result = self.settle(operation, key, lock_id, timeout, started, granted);
        tracing::debug!(
            outcome = outcome_name(&result),
            operation,
            "acquisition finished"
        );
        result
    }

    /// The end of an acquisition in either mode: the guard, or the port's
    /// error with the key and the timeout; the metrics; the span's outcome
    /// fields (of the span the caller runs in).
    pub(super) fn settle(
        &self,
        operation: &'static str,
        key: &str,
        lock_id: i64,
        timeout: Option<Duration>,
        started: Option<Instant>,
        granted: std::result::Result<Granted, AcquireFailure>,
    ) -> Result<LockGuard> {
        let outcome = match &granted {
            Ok(g) if g.waited => Outcome::GrantedAfterWait,
            Ok(_) => Outcome::Granted,
            Err(AcquireFailure::Timeout) if timeout == Some(Duration::ZERO) => Outcome::Contended,
            Err(AcquireFailure::Timeout) => Outcome::Timeout,
            Err(_) => Outcome::Error,
        };
        let result = match granted {
            Ok(g) => Ok(self.guard(key, lock_id, g)),
            Err(failure) => Err(acquisition(key, failure, timeout)),
        };
        let span = tracing::Span::current();
        if let Some(elapsed) = started.map(|s| s.elapsed()) {
            self.record(operation, outcome, elapsed, key);
            span.record("eventsource.lock.wait_us", elapsed.as_micros() as u64);
        }
        span.record("eventsource.lock.outcome", outcome_name(&result));
        match &result {
            Ok(g) => {
                if let Some(f) = g.fence() {
                    span.record("eventsource.lock.fence", f);
                }
            }
            Err(e) => {
                span.record("error.type", error_type(e));
                span.record("otel.status_code", "ERROR");
            }
        }
        result
    }

    /// Records an acquisition's metrics (with the opt-in key prefix).
    pub(super) fn record(
        &self,
        operation: &'static str,
        outcome: Outcome,
        elapsed: Duration,
        key: &str,
    ) {
        let prefixes = self.ctx().settings.key_prefixes.as_deref();
        metrics::acquisition(operation, outcome, elapsed, prefixes.map(|p| (p, key)));
    }
}

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
    /// Only a server silent for that long is an [`AcquireFailure::Backend`]
    /// error of kind [`BackendErrorKind::NoAnswer`](crate::error::BackendErrorKind::NoAnswer) ("the server did not
    /// answer"), never [`AcquireFailure::Timeout`] (which means the key was
    /// held elsewhere and not granted in time).
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped at any await point: no lock stays held and
    /// no session is left waiting. A server-side wait nobody wants is
    /// cancelled, or, when its own `lock_timeout` ends within 50 ms, left to
    /// end by itself (a cancel costs a connection); a grant that raced the
    /// drop, or came in those 50 ms, is released within about a round trip,
    /// so another process may see the key held for that moment. Not cancel safe in tokio's sense: a dropped wait loses
    /// its place in the queue, as `tokio::sync::Semaphore::acquire` does.
    fn acquire(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<LockGuard>> + Send {
        let (address, port) = &self.ctx().server;
        let span = lock_span!(
            "eventsource.lock.acquire",
            "acquire",
            key,
            "server.address" = %address,
            "server.port" = port,
            "eventsource.lock.id" = tracing::field::Empty,
            "eventsource.lock.fence" = tracing::field::Empty,
            "eventsource.lock.wait_us" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        self.acquire_in(LockMode::Exclusive, key, timeout)
            .instrument(span)
    }

    /// One try-lock, never waiting. `Ok(None)` when another session holds
    /// the key, or another task of this manager holds or is taking it.
    ///
    /// It first waits out this manager's own abandoned wait for the key
    /// (at most about 50 ms after a timed-out `acquire`), never losing to it.
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
            key,
            "server.address" = %address,
            "server.port" = port,
            "eventsource.lock.id" = tracing::field::Empty,
            "eventsource.lock.fence" = tracing::field::Empty,
        );
        async move {
            let started = Instant::now();
            let zero = Some(Duration::ZERO);
            let lock_id = checked_lock_id(key, zero)?;
            tracing::Span::current().record("eventsource.lock.id", lock_id);
            let key_arc: Arc<str> = Arc::from(key);
            let r = match self.state.acquirer.try_once(lock_id, &key_arc).await {
                Ok(Some(g)) => Ok(Some(self.guard(key, lock_id, g))),
                Ok(None) => Ok(None),
                Err(failure) => Err(acquisition(key, failure, zero)),
            };
            let outcome = match &r {
                Ok(Some(_)) => "acquired",
                Ok(None) => "held_elsewhere",
                Err(_) => "error",
            };
            self.record(
                "try_lock",
                match &r {
                    Ok(Some(_)) => Outcome::Granted,
                    Ok(None) => Outcome::Contended,
                    Err(_) => Outcome::Error,
                },
                started.elapsed(),
                key,
            );
            let span = tracing::Span::current();
            span.record("eventsource.lock.outcome", outcome);
            if let Ok(Some(fence)) = r.as_ref().map(|g| g.as_ref().and_then(LockGuard::fence)) {
                span.record("eventsource.lock.fence", fence);
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
            key,
            "eventsource.lock.id" = lock_id,
        );
        let held = self.ctx().holdings.take_manual(lock_id, key);
        async move {
            let r = match held {
                Some(lock) => Box::new(lock).release().await,
                None => Err(Error::LockNotHeld(LockNotHeldError {
                    key: key.to_owned(),
                })),
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
        let zero = Some(Duration::ZERO);
        let mut ids = Vec::with_capacity(keys.len());
        for key in keys {
            ids.push((checked_lock_id(key, zero)?, Arc::<str>::from(*key)));
        }
        let settings = &self.ctx().settings;
        if settings.fencing || settings.single_session {
            for (i, key) in keys.iter().enumerate() {
                if let Some(guard) = self.try_lock(key).await? {
                    return Ok(Some((i, guard)));
                }
            }
            return Ok(None);
        }
        let started = Instant::now();
        let taken = self.state.acquirer.try_any(&ids).await;
        let outcome = match &taken {
            Ok(Some(_)) => Outcome::Granted,
            Ok(None) => Outcome::Contended,
            Err(_) => Outcome::Error,
        };
        let first = keys.first().copied().unwrap_or_default();
        self.record("try_acquire", outcome, started.elapsed(), first);
        match taken {
            Ok(Some((i, g))) => Ok(Some((i, self.guard(keys[i], ids[i].0, g)))),
            Ok(None) => Ok(None),
            Err(failure) => Err(acquisition(first, failure, zero)),
        }
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
        let items = self.ctx().holdings.take_all_held();
        let count = items.len();
        let mut waits = Vec::with_capacity(count);
        for item in items {
            match item.manual {
                Some(lock) => waits.push(Box::new(lock).release()),
                None => {
                    let (tx, rx) = oneshot::channel();
                    if !item.session.send_unlock(item.lock_id, item.token, Some(tx)) {
                        self.ctx().finish(item.lock_id, item.token);
                    }
                    waits.push(Box::pin(async move {
                        let _ = rx.await;
                        Ok(())
                    }));
                }
            }
        }
        async move {
            for w in waits {
                // A lock whose session already ended is released all the same.
                let _ = w.await;
            }
            tracing::debug!(count, "release_all finished");
            Ok(count)
        }
    }

    /// Locks held in either mode (each shared hold counts once).
    fn held_lock_count(&self) -> usize {
        self.ctx().holdings.held()
    }
}
