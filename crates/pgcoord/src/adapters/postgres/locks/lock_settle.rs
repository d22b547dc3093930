//! How an acquisition of the lock ports ends, in every case: the guard or
//! the port's error (with the key and the timeout), the metrics, and the
//! outcome fields of the span the call runs in. A key refused before any
//! work and a call dropped before its end are ends too: counted and marked
//! like the others.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lock_span::{error_type, outcome_name};
use super::manager::PostgresLockManager;
use super::metrics::{self, Operation, Outcome};
use super::session::Granted;
use crate::ports::error::{AcquireFailure, Error, LockAcquisitionError, Result};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{LockGuard, LockMode, LossSignal};

/// The port's error for a failed acquisition of `key`: the one place where
/// the key and the timeout are attached.
pub(super) fn acquisition(key: &str, failure: AcquireFailure, timeout: Option<Duration>) -> Error {
    Error::LockAcquisition(LockAcquisitionError::new(key, failure, timeout))
}

/// Marks the current span as failed with `e` (its outcome aside).
pub(super) fn mark_failed(e: &Error) {
    let span = tracing::Span::current();
    span.record("error.type", error_type(e));
    span.record("otel.status_code", "ERROR");
}

/// Counts an acquisition whose future was dropped before it ended, and
/// says so on its span, unless [`disarm`](Self::disarm)ed by the end. It
/// holds references only: no allocation, and no clock read unless the call
/// had read the clock at its start (a deadline, the metrics, a span).
struct Unsettled<'a> {
    manager: &'a PostgresLockManager,
    operation: Operation,
    key: &'a str,
    started: Option<Instant>,
    armed: bool,
}

impl Unsettled<'_> {
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let span = tracing::Span::current();
        if let Some(elapsed) = self.started.map(|s| s.elapsed()) {
            let m = self.manager;
            m.record(self.operation, Outcome::Abandoned, elapsed, self.key);
            span.record("eventsource.lock.wait_us", elapsed.as_micros() as u64);
        }
        span.record("eventsource.lock.outcome", "abandoned");
    }
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
        let prefixes = self.ctx().settings.key_prefixes.as_deref();
        // The lock's own alarm (raised by `release_all` only), for the
        // per-prefix losses to leave such a deliberate release out.
        let taken = prefixes.map(|_| loss.clone());
        let loss = LossSignal::from_alarms(dead, loss, lease);
        let backend = super::metrics_per_key::wrap(prefixes, key, &loss, taken, Box::new(lock));
        LockGuard::new(info, loss, backend)
    }

    /// An acquisition in either mode, inside the caller's span: the key's
    /// check, the acquirer's path for the mode, then [`settle`](Self::settle).
    /// `operation` is the metrics' label (a zero timeout from
    /// `try_lock_shared` is a try).
    pub(super) async fn acquire_in(
        &self,
        operation: Operation,
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
        let mut unsettled = Unsettled {
            manager: self,
            operation,
            key,
            started,
            armed: true,
        };
        let lock_id = match checked_lock_id(key, timeout) {
            Ok(id) => id,
            Err(e) => {
                unsettled.disarm();
                return Err(self.refused(operation, key, started, e));
            }
        };
        span.record("eventsource.lock.id", lock_id);
        let key_arc: Arc<str> = Arc::from(key);
        let acquirer = &self.state.acquirer;
        let granted = match mode {
            LockMode::Exclusive => acquirer.acquire(lock_id, &key_arc, timeout, started).await,
            LockMode::Shared => acquirer.acquire_shared(lock_id, &key_arc, timeout).await,
        };
        unsettled.disarm();
        let result = self.settle(operation, key, lock_id, timeout, started, granted);
        tracing::debug!(
            outcome = outcome_name(&result),
            operation = operation.as_str(),
            ?mode,
            "acquisition finished"
        );
        result
    }

    /// A call refused before it began (a key too long): counted as an
    /// error, and its span marked failed like any other.
    pub(super) fn refused(
        &self,
        operation: Operation,
        key: &str,
        started: Option<Instant>,
        e: Error,
    ) -> Error {
        let elapsed = started.map(|s| s.elapsed()).unwrap_or_default();
        self.record(operation, Outcome::Error, elapsed, key);
        tracing::Span::current().record("eventsource.lock.outcome", "error");
        mark_failed(&e);
        e
    }

    /// The end of an acquisition in either mode: the guard, or the port's
    /// error with the key and the timeout; the metrics; the span's outcome
    /// fields (of the span the caller runs in).
    pub(super) fn settle(
        &self,
        operation: Operation,
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
            Err(e) => mark_failed(e),
        }
        result
    }

    /// Records an acquisition's metrics (with the opt-in key prefix).
    pub(super) fn record(
        &self,
        operation: Operation,
        outcome: Outcome,
        elapsed: Duration,
        key: &str,
    ) {
        let prefixes = self.ctx().settings.key_prefixes.as_deref();
        metrics::acquisition(operation, outcome, elapsed, prefixes.map(|p| (p, key)));
    }
}
