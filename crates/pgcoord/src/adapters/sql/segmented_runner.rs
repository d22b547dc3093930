//! [`SegmentedRunner`]: one of several runners of a segmented projection,
//! each running the segments it holds the lock of; [`RunnerCensus`]: how it
//! counts the runners up.

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;

use super::runner::{ProjectionRunner, RunSummary};
use super::segments::{Segment, SegmentFeed};
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{EventFeed, ReadModelHandler, TransactionalReadModels};
use crate::ports::shared_locks::SharedLock;

/// The default pause between two looks at the segments and the runners.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(1);

/// A lock manager that can count the holders of a shared key across every
/// process (the PostgreSQL manager reads `pg_locks`).
pub trait RunnerCensus: SharedLock {
    /// How many holders `key` has now, in every process.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe (a read).
    fn holders_of(&self, key: &str) -> impl Future<Output = Result<usize>> + Send;
}

/// What a [`SegmentedRunner::run`] did before it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentedSummary {
    /// Events applied by this runner, over every segment it ran.
    pub applied: u64,
    /// Batches committed.
    pub batches: u64,
    /// Events parked in the dead-letter table.
    pub parked: u64,
    /// Segments given up to make room for other runners.
    pub handed_over: u64,
}

type SegmentRun<'a> = Pin<Box<dyn Future<Output = (usize, Result<RunSummary>)> + Send + 'a>>;

/// One runner of a projection whose events are split into a fixed number
/// of [`Segment`]s by partition key.
///
/// Each segment is a [`ProjectionRunner`] over a [`SegmentFeed`], with its
/// own checkpoint and runner lock (both named by
/// [`Segment::projection_name`]), so a segment is run by one runner at a
/// time across every process, in position order (so a partition's events
/// keep their order), and resumes at its committed checkpoint wherever it
/// runs next: no event is applied twice or skipped across a hand-over.
///
/// Any number of `SegmentedRunner`s of the projection, in any processes,
/// share the segments. Each holds a shared lock on
/// `projection:{name}/runners` for as long as it runs, and every
/// [recheck interval](Self::recheck) (default 1 s) it counts that lock's
/// holders (`runners`), then:
///
/// - takes free segments (one attempt at each lock, never queueing, from a
///   random place in the list so runners do not all try the same one
///   first) until it runs `ceil(segments / runners)` of them;
/// - gives up the segments it runs beyond that share (the highest
///   indices), each stopping cleanly: its batch in progress commits, then
///   its lock is released, and a runner that counts the newcomer takes it
///   at its next look.
///
/// A crashed runner's session ends and its locks with it; the others take
/// its segments at their next look. So a newcomer gets its share within
/// about two recheck intervals, and a dead runner's segments move within
/// the lock manager's lease plus one interval. There is no wake-up when
/// another runner lets a segment go: the recheck interval is the bound.
///
/// Give each `SegmentedRunner` its own lock manager (one manager's shared
/// holds count once).
pub struct SegmentedRunner<H: ReadModelHandler, B, F: EventFeed> {
    name: String,
    segments: Vec<ProjectionRunner<H, B, SegmentFeed<F>>>,
    recheck: Duration,
}

impl<H, B, F> SegmentedRunner<H, B, F>
where
    H: ReadModelHandler,
    B: TransactionalReadModels<H::Model>,
    F: EventFeed<Event = H::Event>,
{
    /// The runner of projection `name` split into `count` segments; `make`
    /// builds each segment's runner, whose projection must be named
    /// [`segment.projection_name(name)`](Segment::projection_name) and whose
    /// feed must be [`segment.feed(..)`](Segment::feed). The segment
    /// runners' [lock wait](ProjectionRunner::lock_wait) is set to one
    /// attempt.
    pub fn new(
        name: &str,
        count: u32,
        mut make: impl FnMut(Segment) -> ProjectionRunner<H, B, SegmentFeed<F>>,
    ) -> Result<Self> {
        Segment::new(0, count)?; // 1 to MAX_SEGMENTS segments
        let mut segments = Vec::with_capacity(count as usize);
        for index in 0..count {
            let segment = Segment::new(index, count)?;
            let runner = make(segment).lock_wait(Some(Duration::ZERO));
            let want = segment.projection_name(name);
            if runner.projection().name() != want {
                return Err(Error::InvalidArgument(format!(
                    "{segment} of projection {name:?}: its projection is named {:?}, expected {want:?}",
                    runner.projection().name()
                )));
            }
            if runner.feed().segment() != segment {
                return Err(Error::InvalidArgument(format!(
                    "{segment} of projection {name:?}: its feed reads {}",
                    runner.feed().segment()
                )));
            }
            segments.push(runner);
        }
        Ok(Self {
            name: name.to_owned(),
            segments,
            recheck: DEFAULT_RECHECK,
        })
    }

    /// The pause between two looks at the segments and the runners (at
    /// least 1 ms). Default: 1 s.
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every.max(Duration::from_millis(1));
        self
    }

    /// The segment runners, by index.
    pub fn segments(&self) -> &[ProjectionRunner<H, B, SegmentFeed<F>>] {
        &self.segments
    }

    /// The key every runner of the projection holds shared while it runs.
    pub fn presence_key(&self) -> String {
        format!("projection:{}/runners", self.name)
    }

    /// Runs the segments this runner gets until `shutdown` is cancelled
    /// (`Ok`: every segment run stopped cleanly, its batch committed) or a
    /// segment fails with an error other than a lost lock (the others stop
    /// cleanly, then the error is returned). A segment whose lock is lost
    /// is logged and becomes free again.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in that nothing is lost or leaks: dropped, every segment
    /// run is dropped (its batch in progress rolls back, its lock is
    /// released), the presence hold is released, and the segments resume
    /// at their committed checkpoints wherever they run next. It never
    /// waits in a lock queue. Cancelling `shutdown` is the clean stop.
    pub fn run<'a, L: RunnerCensus>(
        &'a self,
        locks: &'a L,
        shutdown: &'a CancellationToken,
    ) -> impl Future<Output = Result<SegmentedSummary>> + Send + 'a {
        self.run_segments(locks, shutdown)
    }

    async fn run_segments<L: RunnerCensus>(
        &self,
        locks: &L,
        shutdown: &CancellationToken,
    ) -> Result<SegmentedSummary> {
        let presence_key = self.presence_key();
        let mut done = SegmentedSummary::default();
        let presence = tokio::select! {
            g = locks.acquire_shared(&presence_key, None) => g?,
            _ = shutdown.cancelled() => return Ok(done),
        };
        let n = self.segments.len();
        let start = (uuid::Uuid::new_v4().as_u128() % n as u128) as usize;
        let mut stops: Vec<Option<CancellationToken>> = vec![None; n];
        let mut running: FuturesUnordered<SegmentRun<'_>> = FuturesUnordered::new();
        let mut tried: HashSet<usize> = HashSet::new();
        let mut share = n;
        let mut failure = None;
        let mut tick = tokio::time::interval(self.recheck);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!(projection = %self.name, segments = n, "segmented runner started");
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some((i, result)) = running.next() => {
                    stops[i] = None;
                    if let Err(e) = self.settle(i, result, &mut done) {
                        failure = Some(e);
                        break;
                    }
                }
                _ = tick.tick() => {
                    tried.clear();
                    share = match locks.holders_of(&presence_key).await {
                        Ok(runners) => n.div_ceil(runners.max(1)),
                        Err(e) => {
                            tracing::warn!(projection = %self.name, error = %e,
                                "segmented runner: cannot count the runners; keeping the share");
                            share
                        }
                    };
                    done.handed_over += self.give_up_extra(&stops, share);
                }
            }
            let active = stops
                .iter()
                .filter(|s| s.as_ref().is_some_and(|t| !t.is_cancelled()))
                .count();
            let idle = (0..n)
                .map(|k| (start + k) % n)
                .filter(|i| stops[*i].is_none() && !tried.contains(i))
                .take(share.saturating_sub(active))
                .collect::<Vec<_>>();
            for i in idle {
                tried.insert(i);
                let stop = shutdown.child_token();
                stops[i] = Some(stop.clone());
                let runner = &self.segments[i];
                running.push(Box::pin(async move { (i, runner.run(locks, &stop).await) }));
            }
        }
        for stop in stops.iter().flatten() {
            stop.cancel();
        }
        while let Some((i, result)) = running.next().await {
            if let Err(e) = self.settle(i, result, &mut done) {
                failure.get_or_insert(e);
            }
        }
        let released = presence.release().await;
        tracing::info!(projection = %self.name, applied = done.applied, "segmented runner stopped");
        match failure {
            Some(e) => Err(e),
            None => released.map(|_| done),
        }
    }

    /// Stops the running segments beyond `share` (highest indices first);
    /// returns how many.
    fn give_up_extra(&self, stops: &[Option<CancellationToken>], share: usize) -> u64 {
        let active: Vec<usize> = (0..stops.len())
            .filter(|i| stops[*i].as_ref().is_some_and(|t| !t.is_cancelled()))
            .collect();
        let extra = active.len().saturating_sub(share);
        for &i in active.iter().rev().take(extra) {
            tracing::info!(projection = %self.name, segment = i, share,
                "segmented runner: giving a segment up for another runner");
            if let Some(t) = &stops[i] {
                t.cancel();
            }
        }
        extra as u64
    }

    /// Books a finished segment run; `Err` for a failure that stops the
    /// runner.
    fn settle(
        &self,
        i: usize,
        result: Result<RunSummary>,
        done: &mut SegmentedSummary,
    ) -> Result<()> {
        match result {
            Ok(run) => {
                done.applied += run.applied;
                done.batches += run.batches;
                done.parked += run.parked;
                Ok(())
            }
            // Held by another runner: free to try again at the next look.
            Err(e) if e.is_timeout() => Ok(()),
            Err(e @ Error::LockLost(_)) => {
                tracing::warn!(projection = %self.name, segment = i, error = %e,
                    "segmented runner: a segment's lock was lost; it is free again");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl<H: ReadModelHandler, B, F: EventFeed> fmt::Debug for SegmentedRunner<H, B, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentedRunner")
            .field("name", &self.name)
            .field("segments", &self.segments.len())
            .field("recheck", &self.recheck)
            .finish()
    }
}
