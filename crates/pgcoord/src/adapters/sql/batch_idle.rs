//! How long a runner's (or a rebuild's) batch transaction may sit idle
//! between two statements before the server ends it: [`BatchIdle`], the
//! setting, and what it resolves to once the runner lock is held.

use std::time::{Duration, Instant};

use crate::ports::error::{BackendErrorKind, Error};
use crate::ports::locks::LockGuard;
use crate::ports::readmodels::batch_idle_bound;

/// The bound on a batch transaction's idle time when the runner lock has
/// no lease (see [`ProjectionRunner::batch_idle_timeout`](super::ProjectionRunner::batch_idle_timeout)).
pub const DEFAULT_BATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The setting: derived from the lock (the default), fixed, or off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum BatchIdle {
    /// The lock's lease when it has one, else [`DEFAULT_BATCH_IDLE_TIMEOUT`].
    #[default]
    FromLock,
    /// This bound.
    Fixed(Duration),
    /// No bound.
    Off,
}

impl BatchIdle {
    /// `Some(bound)`: that bound (zero is off); `None`: off.
    pub(crate) fn from_option(bound: Option<Duration>) -> Self {
        match bound {
            Some(b) if !b.is_zero() => Self::Fixed(b),
            _ => Self::Off,
        }
    }

    /// The bound for the batches run under `guard`: in lease mode, the
    /// time the lease is known to hold when the lock is taken (about nine
    /// tenths of the lease), rounded up to a second: past it, another
    /// runner may hold the lock, and this one's transaction must not hold
    /// its feed back.
    pub(crate) fn resolve(self, guard: &LockGuard) -> Option<Duration> {
        match self {
            Self::Off => None,
            Self::Fixed(b) => Some(b),
            Self::FromLock => Some(match guard.loss_signal().lease_deadline() {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    Duration::from_secs(left.as_secs() + 1)
                }
                None => DEFAULT_BATCH_IDLE_TIMEOUT,
            }),
        }
    }
}

/// `e` with its cause named when it is the end of the session of a batch
/// transaction that had an idle bound: the server ends a transaction idle
/// for longer (or the session ended for another reason: a restart).
pub(crate) fn explain_ended(e: Error) -> Error {
    let Some(bound) = batch_idle_bound() else {
        return e;
    };
    match e {
        Error::Backend(b) if b.kind() == BackendErrorKind::Closed => Error::Backend(b.in_context(&format!(
            "the batch transaction's session ended, nothing of it was applied (the server ends a batch transaction \
             idle for more than {bound:?} between two statements, the runner's batch_idle_timeout: a frozen runner, \
             or a handler that waits that long between statements needs a larger one; else a restart or a \
             terminated session)"
        ))),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{explain_ended, BatchIdle, DEFAULT_BATCH_IDLE_TIMEOUT};
    use crate::ports::error::{BackendError, BackendErrorKind, Error};
    use crate::ports::locks::DistributedLock;
    use crate::ports::readmodels::with_batch_idle_bound;

    fn closed() -> Error {
        Error::Backend(BackendError::new(
            BackendErrorKind::Closed,
            "connection closed",
        ))
    }

    #[tokio::test]
    async fn an_ended_session_in_a_bounded_batch_names_the_bound_and_the_knob() {
        let bound = Some(Duration::from_millis(250));
        let e = with_batch_idle_bound(bound, async { explain_ended(closed()) }).await;
        let text = e.to_string();
        assert!(
            text.contains("250ms") && text.contains("batch_idle_timeout"),
            "{text}"
        );
        assert!(
            text.contains("connection closed"),
            "the driver's words kept: {text}"
        );
        let outside = explain_ended(closed()).to_string();
        assert!(
            !outside.contains("batch_idle_timeout"),
            "no bound, no claim: {outside}"
        );
        let other = Error::InvalidArgument("x".into());
        let same = with_batch_idle_bound(bound, async { explain_ended(other) }).await;
        assert!(matches!(same, Error::InvalidArgument(_)), "{same}");
    }

    #[tokio::test]
    async fn the_bound_is_the_default_without_a_lease_and_off_when_asked() {
        let locks = crate::InMemoryLockManager::new(None);
        let guard = locks.acquire("projection:p", None).await.unwrap();
        assert_eq!(
            BatchIdle::default().resolve(&guard),
            Some(DEFAULT_BATCH_IDLE_TIMEOUT)
        );
        let fixed = BatchIdle::from_option(Some(Duration::from_secs(3)));
        assert_eq!(fixed.resolve(&guard), Some(Duration::from_secs(3)));
        assert_eq!(BatchIdle::from_option(None).resolve(&guard), None);
        assert_eq!(BatchIdle::from_option(Some(Duration::ZERO)), BatchIdle::Off);
    }
}
