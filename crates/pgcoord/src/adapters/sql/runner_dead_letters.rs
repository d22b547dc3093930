//! The [`ProjectionRunner`]'s dead letters: a batch that parks poison
//! events (and, sequenced, the events held behind them), and the library
//! calls to list, replay and drop parked events.

use std::collections::HashSet;

use chrono::Utc;

use super::dead_letter_policy::DeadLetterPolicy;
use super::runner::ProjectionRunner;
use super::runner_metrics;
use crate::ports::error::{Error, Result};
use crate::ports::locks::LockGuard;
use crate::ports::readmodels::{
    DeadLetter, DeadLetterSelection, EventFeed, HeldBatch, HoldingBatch, Parking, ReadModelError,
    ReadModelHandler, TransactionalReadModels,
};

/// What a replay of dead letters did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Parked events applied through the handler (and removed).
    pub applied: u64,
    /// Parked events whose replay failed, with the error (they stay
    /// parked; the rest of their partition stays parked behind them).
    pub failed: Vec<(i64, String)>,
}

/// What one batch did with dead letters on.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Step {
    pub applied: u64,
    pub parked: u64,
}

impl<H, B, F> ProjectionRunner<H, B, F>
where
    H: ReadModelHandler,
    B: TransactionalReadModels<H::Model>,
    F: EventFeed<Event = H::Event>,
{
    /// Applies a batch with dead letters on: in one transaction when every
    /// handler call succeeds; otherwise event by event, each retried with
    /// the projection's retry policy and parked (with its checkpoint, in
    /// one transaction) when it still fails with an error that is not
    /// transient.
    pub(super) async fn apply_parking(
        &self,
        policy: &DeadLetterPolicy<H::Event>,
        batch: &[(i64, H::Event)],
    ) -> Result<Step> {
        let refs: Vec<(i64, &H::Event)> = batch.iter().map(|(p, e)| (*p, e)).collect();
        let partitions: Vec<Option<String>> =
            batch.iter().map(|(_, e)| (policy.partition)(e)).collect();
        let whole = self.holding(policy, &refs, &partitions);
        if let Ok(done) = self
            .projection
            .backend()
            .apply_batch_holding(self.projection.name(), &whole, self.projection.handler())
            .await
        {
            return Ok(Step {
                applied: done.applied,
                parked: done.held,
            });
        }
        let mut step = Step::default();
        for (one, partition) in refs.chunks(1).zip(partitions.chunks(1)) {
            let done = self.apply_or_park(policy, one, partition).await?;
            step.applied += done.applied;
            step.parked += done.parked;
        }
        Ok(step)
    }

    fn holding<'a>(
        &self,
        policy: &DeadLetterPolicy<H::Event>,
        events: &'a [(i64, &'a H::Event)],
        partitions: &'a [Option<String>],
    ) -> HoldingBatch<'a, H::Event> {
        HoldingBatch {
            events,
            partitions,
            sequenced: policy.sequenced,
            payload: policy.payload,
        }
    }

    async fn apply_or_park(
        &self,
        policy: &DeadLetterPolicy<H::Event>,
        one: &[(i64, &H::Event)],
        partition: &[Option<String>],
    ) -> Result<Step> {
        let (retry, transient) = self.projection.retry_policy();
        let (name, backend) = (self.projection.name(), self.projection.backend());
        let (position, event) = one[0];
        let first_failure = Utc::now();
        let mut attempt = 1;
        loop {
            let batch = self.holding(policy, one, partition);
            let e = match backend
                .apply_batch_holding(name, &batch, self.projection.handler())
                .await
            {
                Ok(HeldBatch { applied, held }) => {
                    return Ok(Step {
                        applied,
                        parked: held,
                    })
                }
                Err(e) => e,
            };
            if attempt < retry.max_attempts {
                let wait = retry.jittered_backoff(attempt);
                runner_metrics::retried(name);
                tracing::warn!(projection = %name, position, attempt, ?wait, error = %e,
                    "projection runner: applying an event failed, retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            if transient(&e) {
                return Err(ReadModelError::ProjectionFailed {
                    projection: name.to_owned(),
                    position,
                    attempts: attempt,
                    cause: Box::new(e),
                }
                .into());
            }
            let parking = Parking {
                position,
                partition: partition[0].clone(),
                payload: (policy.payload)(event),
                error: e.to_string(),
                attempts: attempt,
                first_failure,
            };
            let parked = backend.park(name, &parking).await?;
            tracing::error!(projection = %name, position, attempts = attempt, error = %e,
                "projection runner: event parked in the dead-letter table");
            return Ok(Step {
                applied: 0,
                parked: u64::from(parked),
            });
        }
    }

    /// The projection's parked events that `selection` selects, by
    /// position.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub async fn list_dead_letters(
        &self,
        selection: &DeadLetterSelection,
    ) -> Result<Vec<DeadLetter>> {
        let backend = self.projection.backend();
        backend
            .dead_letters(self.projection.name(), selection)
            .await
    }

    /// Removes the selected parked events without applying them; returns
    /// how many went.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, they went or not.
    pub async fn drop_dead_letters(&self, selection: &DeadLetterSelection) -> Result<u64> {
        let name = self.projection.name();
        let n = self
            .projection
            .backend()
            .remove_dead_letters(name, selection)
            .await?;
        self.publish_parked().await;
        Ok(n)
    }

    /// Applies the selected parked events through the handler, reading each
    /// again from the feed at its position ([`EventFeed::read_at`]), and
    /// removes them (one transaction per event). Selecting an event of a
    /// partition replays the partition's parked events, in order, from its
    /// first; a failure stops that partition (the failed event and those
    /// after it stay parked, the failure is recorded on the event) and the
    /// others go on. Runs beside a runner of the projection (in this or
    /// another process): events the runner parks meanwhile behind a
    /// replayed partition are replayed too.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: each parked event is applied and removed, or neither;
    /// replaying again resumes with what is left.
    pub async fn replay_dead_letters(&self, selection: &DeadLetterSelection) -> Result<Replayed> {
        let (name, backend) = (self.projection.name(), self.projection.backend());
        let mut done = Replayed::default();
        let mut failed: HashSet<Option<String>> = HashSet::new();
        let mut partitions: HashSet<String> = HashSet::new();
        let mut tried: HashSet<i64> = HashSet::new();
        let mut first = true;
        loop {
            let all = backend
                .dead_letters(name, &DeadLetterSelection::All)
                .await?;
            if first {
                partitions = all
                    .iter()
                    .filter(|l| selection.selects(l))
                    .filter_map(|l| l.partition.clone())
                    .collect();
            }
            let targets: Vec<&DeadLetter> = all
                .iter()
                .filter(|l| !tried.contains(&l.position))
                .filter(|l| match &l.partition {
                    Some(k) => partitions.contains(k) && !failed.contains(&l.partition),
                    None => first && selection.selects(l),
                })
                .collect();
            first = false;
            if targets.is_empty() {
                break;
            }
            for letter in targets {
                tried.insert(letter.position);
                if letter.partition.is_some() && failed.contains(&letter.partition) {
                    continue;
                }
                match self.replay_one(letter.position).await {
                    Ok(true) => done.applied += 1,
                    Ok(false) => {}
                    Err(Error::LockLost(e)) => return Err(Error::LockLost(e)),
                    Err(e) => {
                        let text = e.to_string();
                        backend
                            .record_dead_letter_failure(name, letter.position, &text)
                            .await?;
                        tracing::warn!(projection = %name, position = letter.position, error = %text,
                            "replaying a parked event failed; it stays parked");
                        done.failed.push((letter.position, text));
                        if letter.partition.is_some() {
                            failed.insert(letter.partition.clone());
                        }
                    }
                }
            }
        }
        self.publish_parked().await;
        Ok(done)
    }

    async fn replay_one(&self, position: i64) -> Result<bool> {
        let Some(event) = self.feed.read_at(position).await? else {
            return Err(Error::InvalidArgument(format!(
                "the feed has no event at position {position} any more"
            )));
        };
        let (name, backend) = (self.projection.name(), self.projection.backend());
        backend
            .apply_dead_letter(name, position, self.projection.handler(), &event)
            .await
    }

    /// Replays the parked events marked for replay. An event whose replay
    /// fails has the failure recorded and its partition's marks cleared
    /// (one attempt per request); a failure to replay at all, other than a
    /// lost lock, is logged, not fatal (the marks stay for the next batch).
    pub(super) async fn replay_requested(
        &self,
        guard: &LockGuard,
        lost: &impl Fn() -> Error,
    ) -> Result<()> {
        let marked = DeadLetterSelection::ReplayRequested;
        let work = async {
            if self.list_dead_letters(&marked).await?.is_empty() {
                return Ok(Replayed::default());
            }
            self.replay_dead_letters(&marked).await
        };
        match self.guarded(guard, lost, work).await {
            Ok(r) if r.applied > 0 || !r.failed.is_empty() => {
                tracing::info!(projection = %self.projection.name(), applied = r.applied,
                    failed = r.failed.len(), "projection runner: replayed the parked events marked for replay");
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e @ Error::LockLost(_)) => Err(e),
            Err(e) => {
                tracing::warn!(projection = %self.projection.name(), error = %e,
                    "projection runner: replaying the marked parked events failed");
                Ok(())
            }
        }
    }

    /// Sets the parked-events gauge from the table (a failure to count is
    /// only logged: it is a metric).
    pub(super) async fn publish_parked(&self) {
        let name = self.projection.name();
        match self.projection.backend().count_dead_letters(name).await {
            Ok(n) => runner_metrics::parked(name, n),
            Err(e) => tracing::debug!(projection = %name, error = %e, "cannot count parked events"),
        }
    }
}
