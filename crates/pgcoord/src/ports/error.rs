//! The crate's one error type and its inspectable kinds.
//!
//! Every fallible call in this crate returns [`Error`]. Callers branch on the
//! kind with the helper methods ([`Error::is_timeout`], [`Error::is_lock_lost`],
//! [`Error::key`], ...) or by matching the `#[non_exhaustive]` enum, never on
//! message strings.

use std::time::Duration;

pub use super::backend_error::{BackendError, BackendErrorKind};
pub use super::fenced::FencedError;
#[cfg(feature = "readmodels")]
pub use super::readmodels::ReadModelError;

/// Shorthand for `std::result::Result<T, pgcoord::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Any failure reported by this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A lock could not be acquired (timeout, budget, database failure, ...).
    #[error(transparent)]
    LockAcquisition(#[from] LockAcquisitionError),
    /// A lock was released that this manager does not hold.
    #[error(transparent)]
    LockNotHeld(#[from] LockNotHeldError),
    /// A held lock was lost (its session died) while the caller relied on it.
    #[error(transparent)]
    LockLost(#[from] LockLostError),
    /// A protected write carried a stale fencing token.
    #[error(transparent)]
    Fenced(#[from] FencedError),
    /// A read-model repository failure.
    #[cfg(feature = "readmodels")]
    #[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
    #[error(transparent)]
    ReadModel(#[from] ReadModelError),
    /// A database failure outside lock acquisition (release, inspection, queries).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The caller passed a value the crate cannot work with.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// True when a lock acquisition gave up because its timeout elapsed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::LockAcquisition(e) if e.is_timeout())
    }

    /// True when a held lock was lost.
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Error::LockLost(_))
    }

    /// True when a protected write was refused for a stale fencing token.
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced(_))
    }

    /// True when a release named a key this manager does not hold.
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::LockNotHeld(_))
    }

    /// The lock key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Error::LockAcquisition(e) => Some(&e.key),
            Error::LockNotHeld(e) => Some(&e.key),
            Error::LockLost(e) => Some(&e.key),
            Error::Fenced(e) => Some(&e.key),
            _ => None,
        }
    }

    /// The acquisition error, if this is one.
    pub fn as_lock_acquisition(&self) -> Option<&LockAcquisitionError> {
        match self {
            Error::LockAcquisition(e) => Some(e),
            _ => None,
        }
    }

    /// The database error underneath, if any.
    pub fn as_backend(&self) -> Option<&BackendError> {
        match self {
            Error::Backend(e) => Some(e),
            Error::LockAcquisition(LockAcquisitionError {
                reason: AcquireFailure::Backend(e),
                ..
            }) => Some(e),
            _ => None,
        }
    }

    /// The read-model error, if this is one.
    #[cfg(feature = "readmodels")]
    #[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
    pub fn as_read_model(&self) -> Option<&ReadModelError> {
        match self {
            Error::ReadModel(e) => Some(e),
            _ => None,
        }
    }
}

/// A lock could not be acquired.
///
/// Carries the key, the reason and the timeout the caller gave (if any).
/// Its text includes the reason's, so [`source`](std::error::Error::source)
/// skips the reason and returns the reason's own cause (the driver's error
/// under [`AcquireFailure::Backend`]), or `None`: a walk of the chain
/// (anyhow's `{:#}`, eyre) prints each cause once.
#[derive(Debug)]
pub struct LockAcquisitionError {
    /// The key that was asked for.
    pub key: String,
    /// Why the acquisition failed.
    pub reason: AcquireFailure,
    /// The timeout the caller gave; `None` means "wait indefinitely".
    pub timeout: Option<Duration>,
}

fn timeout_suffix(timeout: &Option<Duration>) -> String {
    match timeout {
        Some(t) if t.is_zero() => " (no wait)".to_owned(),
        // To the millisecond: a retry's remaining budget would otherwise
        // print as "4.999959635s".
        Some(t) => {
            let shown = match t.as_millis() {
                0 => *t,
                ms => Duration::from_millis(ms.min(u64::MAX as u128) as u64),
            };
            format!(" (timeout {shown:?})")
        }
        None => String::new(),
    }
}

impl std::fmt::Display for LockAcquisitionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (key, reason) = (&self.key, &self.reason);
        let suffix = timeout_suffix(&self.timeout);
        write!(f, "could not acquire lock {key:?}: {reason}{suffix}")
    }
}

impl std::error::Error for LockAcquisitionError {
    /// The reason's cause, not the reason: the text already shows it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.reason)
    }
}

impl LockAcquisitionError {
    /// Builds an acquisition error.
    pub fn new(key: impl Into<String>, reason: AcquireFailure, timeout: Option<Duration>) -> Self {
        Self {
            key: key.into(),
            reason,
            timeout,
        }
    }

    /// True when the timeout elapsed before the lock was granted.
    pub fn is_timeout(&self) -> bool {
        matches!(self.reason, AcquireFailure::Timeout)
    }

    /// True when the key is held elsewhere as far as anyone can tell: the
    /// request was queued by the server and not granted in time. False for
    /// every failure of the server, the network or the caller.
    pub fn is_conflict(&self) -> bool {
        self.is_timeout()
    }
}

/// Why a lock acquisition failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireFailure {
    /// The timeout elapsed while the request waited in the server's queue:
    /// another holder kept the key (with a zero timeout: at the single
    /// attempt). A server that did not answer is not this: it is
    /// [`AcquireFailure::Backend`] with [`BackendErrorKind::NoAnswer`].
    #[error("timed out before the lock was granted")]
    Timeout,
    /// The server cancelled the wait (`pg_cancel_backend`, a server-side
    /// `statement_timeout`): nobody said the key is held elsewhere.
    #[error("the server cancelled the wait ({reason})")]
    Cancelled {
        /// The server's message.
        reason: String,
    },
    /// The key is longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN).
    #[error("key is {len} bytes long; the limit is {limit}")]
    KeyTooLong {
        /// The key's length in bytes.
        len: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The manager already holds (or is acquiring) as many locks as its
    /// budget allows; see the adapter's configuration.
    #[error("lock budget of {limit} held locks is exhausted")]
    BudgetExceeded {
        /// The configured budget.
        limit: usize,
    },
    /// Every session the manager may open for waits and shared holds is
    /// in use (the PostgreSQL manager's `max_wait_sessions`): a try found
    /// none free, or the timeout passed before one was. Says nothing about
    /// the key, which may be free.
    #[error("all {limit} of the lock manager's wait sessions are in use (max_wait_sessions)")]
    WaitSessionsBusy {
        /// The configured number of wait sessions.
        limit: usize,
    },
    /// The manager was shut down ([`close`](crate::PostgresLockManager::close)).
    /// A session that ended is not this: it is [`AcquireFailure::Backend`]
    /// with [`BackendErrorKind::Closed`].
    #[error("the lock manager is closed")]
    ManagerClosed,
    /// Another semaphore participant holds slot `permits`: it was created
    /// with more permits than this one (all must use the same count).
    #[error(
        "another participant holds semaphore slot {permits}: it was created with a larger permit count than {permits}"
    )]
    PermitCountMismatch {
        /// The permit count of the participant that noticed.
        permits: u32,
    },
    /// The database failed or could not be reached.
    #[error(transparent)]
    Backend(BackendError),
}

/// A release named a key that this manager does not hold.
#[derive(Debug, thiserror::Error)]
#[error("lock {key:?} is not held by this manager")]
pub struct LockNotHeldError {
    /// The key that was named.
    pub key: String,
}

impl LockNotHeldError {
    /// The error for `key`: whole, but for a key longer than
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) (no manager holds one), of
    /// which its first 64 characters are kept, followed by `…`.
    pub fn new(key: &str) -> Self {
        Self {
            key: crate::ports::key_limit::shown_key(key).into_owned(),
        }
    }
}

/// A lock was lost while it was relied on: its database session ended.
#[derive(Debug, thiserror::Error)]
#[error("lock {key:?} was lost: {reason}")]
pub struct LockLostError {
    /// The key of the lost lock.
    pub key: String,
    /// What is known about the cause.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_error_is_inspectable() {
        let err: Error = LockAcquisitionError::new(
            "k",
            AcquireFailure::Timeout,
            Some(Duration::from_millis(250)),
        )
        .into();
        assert!(err.is_timeout());
        assert_eq!(err.key(), Some("k"));
        let text = err.to_string();
        assert!(text.contains("\"k\"") && text.contains("250ms"), "{text}");
        assert_eq!(
            err.as_lock_acquisition().unwrap().timeout,
            Some(Duration::from_millis(250))
        );
        // A remaining budget reads to the millisecond.
        let rest = LockAcquisitionError::new(
            "k",
            AcquireFailure::Timeout,
            Some(Duration::from_nanos(4_999_959_635)),
        );
        assert!(rest.to_string().ends_with("(timeout 4.999s)"), "{rest}");
        // A try (timeout zero) says so, not "timeout 0ns".
        let tried = LockAcquisitionError::new("k", AcquireFailure::Timeout, Some(Duration::ZERO));
        assert!(tried.to_string().ends_with("(no wait)"), "{tried}");
    }

    /// Each layer of `e`'s `source()` chain says something its outer
    /// layers did not: no cause printed twice by anyhow's `{:#}`.
    fn assert_no_repeated_cause(e: &(dyn std::error::Error + 'static)) -> usize {
        let mut outer = e.to_string();
        let (mut layers, mut cause) = (1, e.source());
        while let Some(c) = cause {
            let text = c.to_string();
            assert!(
                !outer.contains(&text),
                "{text:?} repeats what {outer:?} said"
            );
            outer.push_str(&text);
            (layers, cause) = (layers + 1, c.source());
        }
        layers
    }

    #[test]
    fn a_chain_walk_prints_each_cause_once() {
        let t = Some(Duration::from_millis(300));
        let timeout: Error = LockAcquisitionError::new("k", AcquireFailure::Timeout, t).into();
        let long = AcquireFailure::KeyTooLong { len: 9, limit: 8 };
        let too_long: Error = LockAcquisitionError::new("k", long, None).into();
        let driver = std::io::Error::other("connection reset by peer");
        let be = BackendError::new(BackendErrorKind::Closed, "lost").with_source(driver);
        let backend: Error = LockAcquisitionError::new("k", AcquireFailure::Backend(be), t).into();
        assert_eq!(assert_no_repeated_cause(&timeout), 1);
        assert_eq!(assert_no_repeated_cause(&too_long), 1);
        // The driver's error is still reachable, one step down.
        assert_eq!(assert_no_repeated_cause(&backend), 2);
        let cause = std::error::Error::source(&backend).unwrap();
        assert_eq!(cause.to_string(), "connection reset by peer");
        // The text is what it was.
        assert_eq!(
            backend.to_string(),
            "could not acquire lock \"k\": database session ended: lost (timeout 300ms)"
        );
        let lost: Error = LockLostError {
            key: "k".into(),
            reason: "gone".into(),
        }
        .into();
        assert_eq!(assert_no_repeated_cause(&lost), 1);
    }

    #[test]
    fn not_held_and_lost_are_distinct_kinds() {
        let nh: Error = LockNotHeldError { key: "a".into() }.into();
        let lost: Error = LockLostError {
            key: "b".into(),
            reason: "session ended".into(),
        }
        .into();
        assert!(nh.is_not_held() && !nh.is_lock_lost() && !nh.is_timeout());
        assert!(lost.is_lock_lost() && !lost.is_not_held());
        assert_eq!(lost.key(), Some("b"));
    }

    #[test]
    fn backend_error_shows_code_and_is_reachable_through_acquisition() {
        let be = BackendError::new(BackendErrorKind::Query, "boom")
            .with_code(crate::ports::sql_state::SqlState::new("53200"));
        let hinted = BackendError::new(BackendErrorKind::Query, "out of shared memory")
            .with_source(std::io::Error::other(
                "HINT: increase max_locks_per_transaction",
            ));
        let copy = hinted.clone_shallow();
        let source = std::error::Error::source(&copy).expect("the source's text is kept");
        assert!(source.to_string().contains("max_locks_per_transaction"));
        assert_eq!(be.to_string(), "database error: boom (SQLSTATE 53200)");
        let err: Error = LockAcquisitionError::new("k", AcquireFailure::Backend(be), None).into();
        assert_eq!(
            err.as_backend().unwrap().code().map(|c| c.code()),
            Some("53200")
        );
        assert!(!err.is_timeout());
    }
}
