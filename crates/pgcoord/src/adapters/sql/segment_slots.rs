//! The bookkeeping of one [`SegmentedRunner`](super::SegmentedRunner) run
//! ([`Slots`]: the segments it runs, those it tried since its last look,
//! the connection outage it rides out), and what a run did
//! ([`SegmentedSummary`]).

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::outage::{is_connection_failure, Outage};
use super::runner::RunSummary;
use crate::ports::error::{Error, Result};

/// What a [`SegmentedRunner::run`](super::SegmentedRunner::run) did before
/// it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentedSummary {
    /// Events applied by this runner, over the segment runs that stopped
    /// cleanly (on the shutdown token, or given up to another runner); a
    /// run that lost its lock or failed reports no count, so its events
    /// are not in here.
    pub applied: u64,
    /// Batches committed, counted as `applied`.
    pub batches: u64,
    /// Events parked in the dead-letter table, counted as `applied`.
    pub parked: u64,
    /// Segments given up to make room for other runners.
    pub handed_over: u64,
}

/// The segments of one run: the stop token of each one running, those
/// tried since the last look, and the outage (connection failures in a
/// row) it rides out, with the pause before it tries again.
#[derive(Debug)]
pub(super) struct Slots {
    stops: Vec<Option<CancellationToken>>,
    tried: HashSet<usize>,
    /// Where the runner starts its tries in the list (random, so that
    /// runners do not all try the same segment first).
    start: usize,
    outage: Outage,
    resume_at: Option<Instant>,
}

impl Slots {
    pub(super) fn new(segments: usize, patience: Duration) -> Self {
        Self {
            stops: vec![None; segments],
            tried: HashSet::new(),
            start: (uuid::Uuid::new_v4().as_u128() % segments as u128) as usize,
            outage: Outage::new(patience),
            resume_at: None,
        }
    }

    /// The segments running and not asked to stop.
    pub(super) fn active(&self) -> Vec<usize> {
        (0..self.stops.len())
            .filter(|i| self.stops[*i].as_ref().is_some_and(|t| !t.is_cancelled()))
            .collect()
    }

    /// A new look: every free segment may be tried again.
    pub(super) fn looked(&mut self) {
        self.tried.clear();
    }

    /// When the pause after a connection failure ends, if one runs.
    pub(super) fn resume_at(&self) -> Option<Instant> {
        self.resume_at
    }

    /// The free segments to try now, so as to run `share` (each at most
    /// once per look; none while a pause after a connection failure runs),
    /// marked as tried.
    pub(super) fn next_tries(&mut self, share: usize) -> Vec<usize> {
        if self.resume_at.is_some_and(|t| Instant::now() < t) {
            return Vec::new();
        }
        self.resume_at = None;
        let n = self.stops.len();
        let idle: Vec<usize> = (0..n)
            .map(|k| (self.start + k) % n)
            .filter(|i| self.stops[*i].is_none() && !self.tried.contains(i))
            .take(share.saturating_sub(self.active().len()))
            .collect();
        self.tried.extend(&idle);
        idle
    }

    /// Segment `i` runs until `stop` is cancelled.
    pub(super) fn started(&mut self, i: usize, stop: CancellationToken) {
        self.stops[i] = Some(stop);
    }

    /// Asks every segment run to stop (its batch in progress commits).
    pub(super) fn stop_all(&self) {
        for stop in self.stops.iter().flatten() {
            stop.cancel();
        }
    }

    /// The server answered (a lock was granted): the outage is over.
    pub(super) fn answered(&mut self) {
        self.outage.ended();
    }

    /// Stops the running segments beyond `share` (highest indices first);
    /// returns how many.
    pub(super) fn give_up_extra(&self, projection: &str, share: usize) -> u64 {
        let active = self.active();
        let extra = active.len().saturating_sub(share);
        for &i in active.iter().rev().take(extra) {
            tracing::info!(projection = %projection, segment = i, share,
                "segmented runner: giving a segment up for another runner");
            if let Some(t) = &self.stops[i] {
                t.cancel();
            }
        }
        extra as u64
    }

    /// Books a connection failure: `Ok` while the outage is tolerated
    /// (tries pause, then go on), the error once it stops the runner.
    pub(super) fn failed(&mut self, projection: &str, e: Error) -> Result<()> {
        if !self.outage.tolerates(&e) {
            return Err(e);
        }
        if self.resume_at.is_none_or(|t| t <= Instant::now()) {
            let pause = self.outage.next_pause();
            self.resume_at = Some(Instant::now() + pause);
            tracing::warn!(projection = %projection, ?pause, error = %e,
                "segmented runner: the database is away; trying again");
        }
        Ok(())
    }

    /// Books segment `i`'s finished run; `Err` for a failure that stops
    /// the runner.
    pub(super) fn settle(
        &mut self,
        projection: &str,
        i: usize,
        result: Result<RunSummary>,
        done: &mut SegmentedSummary,
    ) -> Result<()> {
        self.stops[i] = None;
        match result {
            Ok(run) => {
                done.applied += run.applied;
                done.batches += run.batches;
                done.parked += run.parked;
                self.outage.ended();
                Ok(())
            }
            // Held by another runner: free to try again at the next look.
            Err(e) if e.is_timeout() => {
                self.outage.ended();
                Ok(())
            }
            Err(e @ Error::LockLost(_)) => {
                tracing::warn!(projection = %projection, segment = i, error = %e,
                    "segmented runner: a segment's lock was lost; it is free again");
                Ok(())
            }
            Err(e) if is_connection_failure(&e) => {
                // Free again, and tried again once the pause is over.
                self.tried.remove(&i);
                self.failed(projection, e)
            }
            Err(e) => Err(e),
        }
    }
}
