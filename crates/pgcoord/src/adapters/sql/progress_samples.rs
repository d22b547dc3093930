//! When the runner and the rebuild write a checkpoint sample for the
//! events/s of a status report
//! ([`TransactionalReadModels::record_progress`](crate::ports::readmodels::TransactionalReadModels::record_progress)):
//! before a batch, at the checkpoint it starts from, the first time and
//! then at most every [`PROGRESS_EVERY`]. A sample taken before the batch
//! it measures makes the batch count: a sample taken after it, at the new
//! checkpoint, says that nothing moved since (the first batch of a run, or
//! a burst after an idle spell, went uncounted, and a status read 0.0
//! events/s).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a sample of the checkpoint is written (at most).
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// When the last sample was written.
#[derive(Debug, Default)]
pub(super) struct ProgressSamples {
    last: Mutex<Option<Instant>>,
}

impl ProgressSamples {
    /// Starts over: the next batch (a new run's first) is sampled.
    pub(super) fn restart(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The position to sample before the batch that starts at `first`,
    /// when a sample is due (the first batch, or [`PROGRESS_EVERY`] since
    /// the last sample; a due sample is counted as written): the
    /// `checkpoint`, or without one the position before the batch.
    pub(super) fn due(&self, checkpoint: Option<i64>, first: i64) -> Option<i64> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return None;
        }
        *last = Some(Instant::now());
        Some(checkpoint.unwrap_or(first.saturating_sub(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::ProgressSamples;

    #[test]
    fn the_first_batch_is_sampled_at_the_checkpoint_it_starts_from() {
        let samples = ProgressSamples::default();
        assert_eq!(samples.due(Some(40), 41), Some(40));
        assert_eq!(samples.due(Some(140), 141), None, "not yet due again");

        samples.restart();
        assert_eq!(samples.due(None, 1), Some(0), "before the first event");
    }
}
