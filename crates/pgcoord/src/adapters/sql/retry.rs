//! When a projection retries: [`RetryPolicy`] (attempts and jittered
//! exponential backoff) and [`is_transient`], the default classification of
//! failures worth retrying.

use std::time::Duration;

use crate::ports::error::{BackendErrorKind, Error};

/// How a projection retries an event whose transaction failed transiently.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait before the second attempt.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// The factor applied to the wait after each failed attempt.
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    /// 5 attempts, waiting 50 ms, 100 ms, 200 ms, 400 ms (capped at 5 s).
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// No retries: one attempt.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The wait after failed attempt number `attempt` (1-based), with
    /// jitter: a random point in the upper half of [`backoff`](Self::backoff),
    /// so that runners failing together do not retry together.
    pub fn jittered_backoff(&self, attempt: u32) -> Duration {
        self.backoff(attempt).mul_f64(0.5 + fastrand::f64() / 2.0)
    }

    /// The wait after failed attempt number `attempt` (1-based), before
    /// jitter.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = self
            .multiplier
            .max(1.0)
            .powi(attempt.saturating_sub(1) as i32);
        let wait = self.initial_backoff.as_secs_f64() * factor;
        Duration::from_secs_f64(wait.min(self.max_backoff.as_secs_f64()))
    }
}

/// True for failures worth retrying: lost or timed-out connections, and the
/// driver errors that say "try again": SQLSTATE `serialization_failure`,
/// `deadlock_detected` and `lock_not_available` on PostgreSQL,
/// `SQLITE_BUSY` and `SQLITE_LOCKED` on SQLite. The codes are read from the
/// driver's own error ([`BackendError::driver_error`](crate::error::BackendError::driver_error)), as typed values. A TLS
/// failure ([`BackendErrorKind::Tls`]) is not transient: the settings or
/// the server's certificate must change first.
pub fn is_transient(error: &Error) -> bool {
    let Some(backend) = error.as_backend() else {
        return false;
    };
    if matches!(
        backend.kind(),
        BackendErrorKind::Closed | BackendErrorKind::NoAnswer | BackendErrorKind::Connect
    ) {
        return true;
    }
    let source = backend.driver_error();
    #[cfg(feature = "postgres")]
    if let Some(pg) = source.and_then(|s| s.downcast_ref::<tokio_postgres::Error>()) {
        use tokio_postgres::error::SqlState;
        return pg.code().is_some_and(|c| {
            *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::LOCK_NOT_AVAILABLE
        });
    }
    #[cfg(feature = "sqlite")]
    if let Some(lite) = source.and_then(|s| s.downcast_ref::<rusqlite::Error>()) {
        use rusqlite::ErrorCode;
        return matches!(
            lite.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        );
    }
    let _ = source;
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::error::BackendError;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(35),
            multiplier: 2.0,
        };
        assert_eq!(p.backoff(1), Duration::from_millis(10));
        assert_eq!(p.backoff(2), Duration::from_millis(20));
        assert_eq!(p.backoff(3), Duration::from_millis(35));
    }

    #[test]
    fn jitter_stays_in_the_upper_half_of_the_backoff() {
        let p = RetryPolicy::default();
        for attempt in 1..6 {
            let full = p.backoff(attempt);
            for _ in 0..50 {
                let j = p.jittered_backoff(attempt);
                assert!(j >= full / 2 && j <= full, "{j:?} of {full:?}");
            }
        }
    }

    #[test]
    fn transient_errors_are_recognised_by_kind_and_typed_code() {
        let closed: Error = BackendError::new(BackendErrorKind::Closed, "gone").into();
        assert!(is_transient(&closed));
        // A string code alone, without the driver's error, is not trusted.
        let stringly: Error = BackendError::new(BackendErrorKind::Query, "x")
            .with_code(crate::ports::sql_state::SqlState::SERIALIZATION_FAILURE)
            .into();
        assert!(!is_transient(&stringly));
        assert!(!is_transient(&Error::InvalidArgument("x".into())));
        let tls: Error = BackendError::new(BackendErrorKind::Tls, "unknown CA").into();
        assert!(!is_transient(&tls));
        #[cfg(feature = "sqlite")]
        {
            let busy = rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                None,
            );
            let constraint = rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
                None,
            );
            let wrap = |e| -> Error {
                BackendError::new(BackendErrorKind::Query, "x")
                    .with_driver_error(e)
                    .into()
            };
            assert!(is_transient(&wrap(busy)));
            assert!(!is_transient(&wrap(constraint)));
        }
    }
}
