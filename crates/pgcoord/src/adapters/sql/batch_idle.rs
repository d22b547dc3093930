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
