//! The steps of a [`ProjectionRebuild`] run: one batch read from the feed
//! and applied to the new version, with the projection's retries, unless
//! the version's lock is lost first.

use super::rebuild::{guarded, ProjectionRebuild};
use crate::ports::error::{Error, Result};
use crate::ports::locks::LockGuard;
use crate::ports::readmodels::{EventFeed, ReadModelHandler, VersionedReadModels};

impl<H, B, F> ProjectionRebuild<H, B, F>
where
    H: ReadModelHandler,
    B: VersionedReadModels<H::Model>,
    F: EventFeed<Event = H::Event>,
{
    /// Reads the batch after `checkpoint` (up to `until` when set) and
    /// applies it to `target` under `vname`; `None` when the feed has
    /// nothing more, else the events applied and the new checkpoint.
    pub(super) async fn catch_up_step(
        &self,
        guard: &LockGuard,
        lost: &impl Fn() -> Error,
        target: &B,
        vname: &str,
        checkpoint: Option<i64>,
        until: Option<i64>,
    ) -> Result<Option<(u64, Option<i64>)>> {
        let mut batch = guarded(guard, lost, self.read(checkpoint)).await?;
        if let Some(until) = until {
            batch.retain(|(p, _)| *p <= until);
        }
        let (Some((first, _)), Some((last, _))) = (batch.first(), batch.last()) else {
            return Ok(None);
        };
        let last = *last;
        // The sample goes before the batch, so that the batch counts.
        if let Some(from) = self.samples.due(checkpoint, *first) {
            target.record_progress(vname, from).await?;
        }
        let refs: Vec<(i64, &H::Event)> = batch.iter().map(|(p, e)| (*p, e)).collect();
        let applied = guarded(guard, lost, self.apply(target, vname, &refs)).await?;
        let checkpoint = Some(last).max(checkpoint);
        self.publisher.publish(checkpoint);
        Ok(Some((applied, checkpoint)))
    }

    async fn read(&self, after: Option<i64>) -> Result<Vec<(i64, H::Event)>> {
        let (policy, transient) = self.projection.retry_policy();
        let mut attempt = 1;
        loop {
            match self.feed.read_after(after, self.batch_size).await {
                Ok(batch) => return Ok(batch),
                Err(e) if attempt < policy.max_attempts && transient(&e) => {
                    tokio::time::sleep(policy.jittered_backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Applies `events` to `target` under the version's checkpoint
    /// `vname`, as the live runner applies a batch: one transaction, and
    /// when it fails, one event per transaction with the projection's
    /// retries, so the events before a poison event are kept and the
    /// failure is [`ReadModelError::ProjectionFailed`] naming `vname` and
    /// the event's position.
    ///
    /// [`ReadModelError::ProjectionFailed`]: crate::ports::readmodels::ReadModelError::ProjectionFailed
    async fn apply(&self, target: &B, vname: &str, events: &[(i64, &H::Event)]) -> Result<u64> {
        let done = self
            .projection
            .apply_batch_on(target, vname, events)
            .await?;
        Ok(done.applied)
    }
}
