//! [`lock_span!`]: the span every lock call runs in, with the fields all of
//! them share (OpenTelemetry's database fields, the key, the outcome), so
//! the list is written once; `docs/observability.md` documents it.

/// A DEBUG span `$name` for lock operation `$op` on `$key`, plus the
/// caller's own fields.
macro_rules! lock_span {
    ($name:literal, $op:literal, $key:expr, $($fields:tt)*) => {
        tracing::debug_span!(
            $name,
            "db.system" = "postgresql",
            "db.system.name" = "postgresql",
            "db.operation.name" = $op,
            "otel.name" = concat!("lock ", $op),
            "otel.kind" = "client",
            "eventsource.lock.key" = $key,
            "eventsource.lock.outcome" = tracing::field::Empty,
            $($fields)*
        )
    };
}

pub(crate) use lock_span;

use crate::ports::error::{AcquireFailure, BackendErrorKind, Error, Result};
use crate::ports::locks::LockGuard;

/// The `error.type` of a failed acquisition's span.
pub(super) fn error_type(e: &Error) -> &'static str {
    match e.as_lock_acquisition().map(|a| &a.reason) {
        Some(AcquireFailure::Timeout) => "timeout",
        Some(AcquireFailure::Cancelled { .. }) => "cancelled",
        Some(AcquireFailure::Backend(b)) if b.kind() == BackendErrorKind::Standby => "standby",
        Some(AcquireFailure::Backend(b)) if b.kind() == BackendErrorKind::FencingNotInstalled => {
            "fencing_not_installed"
        }
        Some(AcquireFailure::BudgetExceeded { .. }) => "budget_exceeded",
        Some(AcquireFailure::WaitSessionsBusy { .. }) => "wait_sessions_busy",
        Some(AcquireFailure::ManagerClosed) => "closed",
        Some(AcquireFailure::KeyTooLong { .. }) => "key_too_long",
        _ => "backend",
    }
}

pub(super) fn outcome_name(r: &Result<LockGuard>) -> &'static str {
    match r {
        Ok(_) => "acquired",
        Err(e) if e.is_timeout() => "timeout",
        Err(_) => "error",
    }
}
