//! The bound on how long a projection's batch transaction may sit idle
//! between two statements before the server ends it
//! (`idle_in_transaction_session_timeout`, set with `SET LOCAL` at the
//! start of each batch transaction by a backend that can).
//!
//! A runner or a rebuild sets it (a task-local) around its batches; the
//! PostgreSQL backend reads it when it begins a transaction of its own.

use std::time::Duration;

tokio::task_local! {
    static BATCH_IDLE_BOUND: Duration;
}

/// The bound of the batches running in this task, if any.
pub(crate) fn batch_idle_bound() -> Option<Duration> {
    BATCH_IDLE_BOUND.try_with(|b| *b).ok()
}

/// Runs `work` with its batch transactions bounded by `bound` (`None`:
/// unbounded).
pub(crate) async fn with_batch_idle_bound<T>(
    bound: Option<Duration>,
    work: impl std::future::Future<Output = T>,
) -> T {
    match bound {
        Some(b) => BATCH_IDLE_BOUND.scope(b, work).await,
        None => work.await,
    }
}

/// The `SET LOCAL` statement that bounds the current transaction's idle
/// time between statements by `bound` (in whole milliseconds, 1 to
/// `INT_MAX`).
pub(crate) fn set_local_idle_timeout(bound: Duration) -> String {
    let ms = bound.as_millis().clamp(1, i32::MAX as u128);
    format!("SET LOCAL idle_in_transaction_session_timeout = {ms}")
}
