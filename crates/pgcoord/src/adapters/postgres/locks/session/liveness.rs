//! A session given up for silence: why (its liveness check, or in lease
//! mode its lease), the warning that says so, and what the requests still
//! queued on it are told.

use super::super::metrics::LossCause;
use super::super::settings::Settings;
use super::mailbox::session_ended;
use crate::ports::error::{BackendError, BackendErrorKind};
use crate::ports::loss::LeaseClock;

/// Why a session whose ping failed lost its locks: in lease mode, a
/// lease that has run out by then (the server may already have ended the
/// session); else the failed check.
pub(super) fn ping_failure_cause(lease: Option<&LeaseClock>) -> LossCause {
    match lease {
        Some(clock) if clock.expired() => LossCause::LeaseExpired,
        _ => LossCause::LivenessFailed,
    }
}

/// What the requests still queued on a session that has ended are told:
/// a session given up for silence is a server that did not answer, not a
/// session the server ended.
pub(super) fn ended_error(cause: LossCause, settings: &Settings) -> BackendError {
    match cause {
        LossCause::LivenessFailed => BackendError::new(
            BackendErrorKind::NoAnswer,
            format!(
                "the server did not answer the lock session's liveness check within {:?}",
                settings.ping_timeout()
            ),
        ),
        LossCause::LeaseExpired => BackendError::new(
            BackendErrorKind::NoAnswer,
            "the server did not confirm the lock session before its lease ran out",
        ),
        LossCause::TimedOut => connection_timed_out(),
        LossCause::SessionEnded => session_ended(),
    }
}

/// What a session whose connection timed out tells its callers: the
/// server went silent (a network cut, a frozen host), it did not end the
/// session.
pub(super) fn connection_timed_out() -> BackendError {
    BackendError::new(
        BackendErrorKind::NoAnswer,
        "the lock session's connection timed out (the server stopped acknowledging it)",
    )
}

/// Warns that the session `pid` was given up for `cause` (a failed
/// liveness check, or a lease that ran out), in words an operator reads.
pub(super) fn warn_given_up(cause: LossCause, pid: i32, settings: &Settings) {
    match cause {
        LossCause::LeaseExpired => tracing::warn!(
            pid,
            "lock session's lease ran out before the server confirmed it; its locks count as lost"
        ),
        _ => tracing::warn!(
            pid,
            timeout = ?settings.ping_timeout(),
            "lock session's liveness check got no answer in time; its locks count as lost"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_failed_ping_after_the_lease_ran_out_is_a_lease_loss() {
        let past = Instant::now() - Duration::from_millis(1);
        let later = Instant::now() + Duration::from_secs(60);
        let expired = LeaseClock::new(past);
        let running = LeaseClock::new(later);
        assert_eq!(ping_failure_cause(Some(&expired)), LossCause::LeaseExpired);
        assert_eq!(
            ping_failure_cause(Some(&running)),
            LossCause::LivenessFailed
        );
        assert_eq!(ping_failure_cause(None), LossCause::LivenessFailed);
    }
}
