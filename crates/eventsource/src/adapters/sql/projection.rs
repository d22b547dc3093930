//! [`ReadModelProjection`]: runs a [`ReadModelHandler`] over events, one
//! transaction per event, retrying transient failures with backoff.

use std::fmt;
use std::time::Duration;

use crate::ports::error::{BackendErrorKind, Error, Result};
use crate::ports::readmodels::{ReadModelHandler, TransactionalReadModels};

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

    /// The wait after failed attempt number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = self
            .multiplier
            .max(1.0)
            .powi(attempt.saturating_sub(1) as i32);
        let wait = self.initial_backoff.as_secs_f64() * factor;
        Duration::from_secs_f64(wait.min(self.max_backoff.as_secs_f64()))
    }
}

/// True for failures worth retrying: lost or timed-out connections,
/// serialization failures (`40001`), deadlocks (`40P01`), lock timeouts
/// (`55P03`), and SQLite's `SQLITE_BUSY` / `SQLITE_LOCKED`.
pub fn is_transient(error: &Error) -> bool {
    let Some(backend) = error.as_backend() else {
        return false;
    };
    matches!(
        backend.kind(),
        BackendErrorKind::Closed | BackendErrorKind::Timeout | BackendErrorKind::Connect
    ) || matches!(
        backend.code(),
        Some("40001" | "40P01" | "55P03" | "SQLITE_BUSY" | "SQLITE_LOCKED")
    )
}

/// Feeds events to a read model's handler.
///
/// Each event runs in its own transaction on the backend (see
/// [`TransactionalReadModels::apply`]): the handler's writes commit
/// together or not at all. A failure that [`is_transient`] (or the
/// classifier set with [`ReadModelProjection::with_classifier`]) is retried
/// after a backoff, up to the policy's attempts; any other failure is
/// returned at once.
pub struct ReadModelProjection<H, B> {
    handler: H,
    backend: B,
    retry: RetryPolicy,
    classify: fn(&Error) -> bool,
}

impl<H, B> ReadModelProjection<H, B>
where
    H: ReadModelHandler,
    B: TransactionalReadModels<H::Model>,
{
    /// A projection with the default retry policy.
    pub fn new(handler: H, backend: B) -> Self {
        Self {
            handler,
            backend,
            retry: RetryPolicy::default(),
            classify: is_transient,
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Replaces the classifier of transient errors.
    pub fn with_classifier(mut self, classify: fn(&Error) -> bool) -> Self {
        self.classify = classify;
        self
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Applies one event, retrying transient failures.
    ///
    /// # Cancel safety
    ///
    /// Dropped mid-way, the current attempt's transaction rolls back; earlier
    /// attempts had rolled back already. The event is then not applied.
    pub async fn handle(&self, event: &H::Event) -> Result<()> {
        let mut attempt = 1;
        loop {
            match self.backend.apply(&self.handler, event).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < self.retry.max_attempts && (self.classify)(&e) => {
                    let wait = self.retry.backoff(attempt);
                    tracing::warn!(attempt, ?wait, error = %e, "read-model projection: transient failure, retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Applies events in order, stopping at the first failure.
    ///
    /// # Cancel safety
    ///
    /// Events before the current one are committed; the current one is not.
    pub async fn handle_all<'e, I>(&self, events: I) -> Result<()>
    where
        I: IntoIterator<Item = &'e H::Event>,
        H::Event: 'e,
    {
        for event in events {
            self.handle(event).await?;
        }
        Ok(())
    }

    /// Empties the read model's table (for a rebuild); returns the number
    /// of rows removed.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the table was emptied or not.
    pub async fn reset(&self) -> Result<u64> {
        self.backend.truncate_all().await
    }
}

impl<H, B> fmt::Debug for ReadModelProjection<H, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadModelProjection")
            .field("handler", &std::any::type_name::<H>())
            .field("backend", &std::any::type_name::<B>())
            .field("retry", &self.retry)
            .finish()
    }
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
    fn transient_errors_are_recognised() {
        let closed: Error = BackendError::new(BackendErrorKind::Closed, "gone").into();
        let serial: Error = BackendError::new(BackendErrorKind::Query, "x")
            .with_code("40001")
            .into();
        let syntax: Error = BackendError::new(BackendErrorKind::Query, "x")
            .with_code("42601")
            .into();
        assert!(is_transient(&closed) && is_transient(&serial));
        assert!(!is_transient(&syntax));
        assert!(!is_transient(&Error::InvalidArgument("x".into())));
    }
}
