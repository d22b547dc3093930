//! How a [`ReadModelProjection`] applies positioned events to a backend
//! under a checkpoint name: one event with its retries, and one batch with
//! its fallback to one event per transaction. The projection's own calls
//! use its backend and name; a rebuild uses the version's backend and
//! checkpoint (`NAME@vN`), so both report a failure the same way.

use super::batch_idle::explain_ended;
use super::catch_up::CatchUp;
use super::projection::ReadModelProjection;
use super::runner_metrics;
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{
    Applied, ReadModelError, ReadModelHandler, TransactionalReadModels,
};

impl<H, B> ReadModelProjection<H, B>
where
    H: ReadModelHandler,
    B: TransactionalReadModels<H::Model>,
{
    /// [`handle_at`](Self::handle_at) on `backend` under the checkpoint
    /// `name` (after [`prepare`](Self::prepare)): transient failures are
    /// retried with jittered backoff, the last failure comes back as
    /// [`ReadModelError::ProjectionFailed`] naming `name` and `position`.
    pub(super) async fn handle_at_on(
        &self,
        backend: &B,
        name: &str,
        position: i64,
        event: &H::Event,
    ) -> Result<Applied> {
        self.prepare().await?;
        let (policy, transient) = self.retry_policy();
        let mut attempt = 1;
        loop {
            let applied = backend.apply_at(name, position, self.handler(), event);
            match applied.await.map_err(explain_ended) {
                Ok(applied) => return Ok(applied),
                Err(e) if attempt < policy.max_attempts && transient(&e) => {
                    self.wait_before_retry(name, attempt, Some(position), &e)
                        .await;
                    attempt += 1;
                }
                Err(e) => {
                    return Err(ReadModelError::ProjectionFailed {
                        projection: name.to_owned(),
                        position,
                        attempts: attempt,
                        cause: Box::new(e),
                    }
                    .into())
                }
            }
        }
    }

    /// [`apply_batch`](Self::apply_batch) on `backend` under the checkpoint
    /// `name` (after [`prepare`](Self::prepare)): the batch in one transaction; when it fails, rolled back and
    /// replayed one event per transaction with
    /// [`handle_at_on`](Self::handle_at_on), so the events before a failing
    /// one are applied and checkpointed and the failure names its position.
    pub(super) async fn apply_batch_on(
        &self,
        backend: &B,
        name: &str,
        events: &[(i64, &H::Event)],
    ) -> Result<CatchUp> {
        self.prepare().await?;
        let mut done = CatchUp::default();
        let batch = backend.apply_batch_at(name, events, self.handler());
        match batch.await.map_err(explain_ended) {
            Ok(applied) => {
                done.applied += applied;
                done.skipped += events.len() as u64 - applied;
            }
            Err(e) => {
                tracing::debug!(projection = %name, error = %e,
                    "read-model projection: batch failed, applying its events one at a time");
                for (position, event) in events {
                    match self.handle_at_on(backend, name, *position, event).await? {
                        Applied::Applied => done.applied += 1,
                        Applied::Skipped => done.skipped += 1,
                    }
                }
            }
        }
        Ok(done)
    }

    /// Waits the jittered backoff after failed attempt `attempt`.
    pub(super) async fn wait_before_retry(
        &self,
        name: &str,
        attempt: u32,
        position: Option<i64>,
        e: &Error,
    ) {
        let (policy, _) = self.retry_policy();
        let wait = policy.jittered_backoff(attempt);
        runner_metrics::retried(name);
        tracing::warn!(
            projection = %name,
            ?position,
            attempt,
            ?wait,
            error = %e,
            "read-model projection: transient failure, retrying"
        );
        tokio::time::sleep(wait).await;
    }
}
