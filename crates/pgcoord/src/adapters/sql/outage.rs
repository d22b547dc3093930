//! How the runners ride out a database that is away for a while (a
//! restart, a failover): a connection failure while a runner takes its
//! lock is tried again after a growing pause, and only failures that go on
//! for longer than the runner's patience stop it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ports::deadline::deadline_in;
use crate::ports::error::{BackendErrorKind, Error, Result};
use crate::ports::locks::LockGuard;
use crate::ports::readmodels::ReadModelError;

/// How long a runner keeps trying to take a lock through connection
/// failures before it stops with the last one (default of
/// [`ProjectionRunner::reconnect_patience`](super::ProjectionRunner::reconnect_patience)
/// and [`SegmentedRunner::reconnect_patience`](super::SegmentedRunner::reconnect_patience)).
pub const DEFAULT_RECONNECT_PATIENCE: Duration = Duration::from_secs(60);

/// The pause after the first failure; it doubles after each further one.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two tries.
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// True for a failure of the connection rather than of the work: the
/// server could not be reached or refused new sessions (a server starting
/// up or shutting down, SQLSTATE 57P03, comes as this), the session ended,
/// or the server did not answer; also an event that failed for that reason
/// after its retries.
pub(super) fn is_connection_failure(e: &Error) -> bool {
    if let Some(ReadModelError::ProjectionFailed { cause, .. }) = e.as_read_model() {
        return is_connection_failure(cause);
    }
    e.as_backend().is_some_and(|b| {
        matches!(
            b.kind(),
            BackendErrorKind::Connect | BackendErrorKind::Closed | BackendErrorKind::NoAnswer
        )
    })
}

/// Connection failures in a row, and how long they have lasted.
#[derive(Debug)]
pub(super) struct Outage {
    patience: Duration,
    since: Option<Instant>,
    failures: u32,
}

impl Outage {
    pub(super) fn new(patience: Duration) -> Self {
        Self {
            patience,
            since: None,
            failures: 0,
        }
    }

    /// After a failed try: true when the runner goes on (a connection
    /// failure, and connection failures have not lasted `patience` yet);
    /// false when the failure stops it.
    pub(super) fn tolerates(&mut self, e: &Error) -> bool {
        if !is_connection_failure(e) {
            return false;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        since.elapsed() < self.patience
    }

    /// The pause before the next try: 100 ms doubling to 5 s over the
    /// outage, at a random point in its upper half (so that runners do not
    /// all try again together).
    pub(super) fn next_pause(&mut self) -> Duration {
        let doubled = FIRST_PAUSE.saturating_mul(1 << self.failures.min(6));
        self.failures += 1;
        doubled
            .min(LONGEST_PAUSE)
            .mul_f64(0.5 + fastrand::f64() / 2.0)
    }

    /// The server answered: the next failure starts a new outage.
    pub(super) fn ended(&mut self) {
        self.since = None;
        self.failures = 0;
    }
}

/// Takes a lock with `acquire` (given how long it may wait: `None`, as
/// long as it takes), trying again after a connection failure for as long
/// as `wait` and `patience` allow; `Ok(None)` when `shutdown` is cancelled
/// first.
pub(super) async fn take_lock<F, Fut>(
    acquire: F,
    key: &str,
    wait: Option<Duration>,
    patience: Duration,
    shutdown: &CancellationToken,
) -> Result<Option<LockGuard>>
where
    F: Fn(Option<Duration>) -> Fut,
    Fut: Future<Output = Result<LockGuard>>,
{
    let deadline = deadline_in(wait);
    let mut outage = Outage::new(patience);
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let e = tokio::select! {
            taken = acquire(left) => match taken {
                Ok(guard) => return Ok(Some(guard)),
                Err(e) => e,
            },
            _ = shutdown.cancelled() => return Ok(None),
        };
        if !outage.tolerates(&e) {
            return Err(e);
        }
        let pause = outage.next_pause();
        if deadline.is_some_and(|d| Instant::now() + pause >= d) {
            return Err(e);
        }
        tracing::warn!(key, ?pause, error = %e,
            "projection runner: cannot take a lock, the database is away; trying again");
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.cancelled() => return Ok(None),
        }
    }
}
