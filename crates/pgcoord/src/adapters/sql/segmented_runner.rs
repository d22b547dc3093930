//! [`SegmentedRunner`]: one of several runners of a segmented projection,
//! each running the segments it holds the lock of; [`RunnerCensus`]: how it
//! counts the runners up.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;

use super::outage::{take_lock, DEFAULT_RECONNECT_PATIENCE};
use super::runner::{ProjectionRunner, RunSummary};
use super::segment_share::{RunnerCensus, Share};
use super::segment_slots::{SegmentedSummary, Slots};
use super::segments::{Segment, SegmentFeed};
use crate::ports::error::{Error, Result};
use crate::ports::locks::LockGuard;
use crate::ports::readmodels::{
    EventFeed, ReadModelError, ReadModelHandler, TransactionalReadModels,
};

/// The default pause between two looks at the segments and the runners.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(1);

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
///   first) until it runs its share, `ceil(segments / runners)`;
/// - gives up the segments it runs beyond that share (the highest
///   indices), each stopping cleanly: its batch in progress commits, then
///   its lock is released, and a runner that counts the newcomer takes it
///   at its next look.
///
/// When the segments do not divide evenly, the ceiling alone can leave a
/// runner below `floor(segments / runners)` for good (4 segments, 3
/// runners: 2, 2 and 0). A runner that has stayed below the floor for
/// three looks holds the shared key `projection:{name}/waiting`; while
/// anyone holds it every runner's share is the floor, so those above it
/// give a segment up and the waiting runner takes one; then it lets the
/// key go and the share is the ceiling again (2, 1, 1).
///
/// A crashed runner's session ends and its locks with it; the others take
/// its segments at their next look. So a newcomer gets its share within
/// about two recheck intervals when the segments divide evenly and within
/// about five when they do not, and a dead runner's segments move within
/// the lock manager's lease plus one interval. There is no wake-up when
/// another runner lets a segment go: the recheck interval is the bound.
///
/// A database restart ends every session: each segment's lock is lost
/// (the segment is free again) and so is the presence hold. The runner
/// then tries again after a growing pause while the server refuses
/// connections (starting up, down), takes its presence hold again, and
/// runs its share once the server answers; connection failures that last
/// the [reconnect patience](Self::reconnect_patience) (60 s by default)
/// stop it.
///
/// Give each `SegmentedRunner` its own lock manager (one manager's shared
/// holds count once).
pub struct SegmentedRunner<H: ReadModelHandler, B, F: EventFeed> {
    name: String,
    segments: Vec<ProjectionRunner<H, B, SegmentFeed<F>>>,
    recheck: Duration,
    patience: Duration,
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
            patience: DEFAULT_RECONNECT_PATIENCE,
        })
    }

    /// The pause between two looks at the segments and the runners (at
    /// least 1 ms). Default: 1 s.
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every.max(Duration::from_millis(1));
        self
    }

    /// How long connection failures (a database restarting, away) are
    /// ridden out: while they last, each segment's lock (and this runner's
    /// presence) is tried again after a pause of 100 ms doubling to 5 s,
    /// with jitter; failures that last this long stop the runner with the
    /// last one. Default: 60 s
    /// ([`DEFAULT_RECONNECT_PATIENCE`](super::DEFAULT_RECONNECT_PATIENCE)).
    pub fn reconnect_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
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
    /// segment fails with an error other than a lost lock or a connection
    /// failure (the others stop cleanly, then the error is returned). A
    /// segment whose lock is lost is logged and becomes free again; a
    /// connection failure frees it too, and tries pause and go on, until
    /// connection failures have lasted the
    /// [reconnect patience](Self::reconnect_patience) (then that error is
    /// returned).
    ///
    /// Before it runs any segment it refuses to start, with
    /// [`ReadModelError::SegmentCountChanged`], when the projection has
    /// checkpoints of another segment count (`{name}/segment-{i}-of-{m}`):
    /// its own segments would start at position 0 and apply every event
    /// again into the same read model (see `docs/projections.md`,
    /// "Changing the segment count").
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in that nothing is lost or leaks: dropped, every segment
    /// run is dropped (its batch in progress rolls back, its lock is
    /// released), the presence hold (and the waiting key, if held) is
    /// released, and the segments resume at their committed checkpoints
    /// wherever they run next. It never waits in a lock queue (while the
    /// database is away it pauses between tries: dropped there, nothing is
    /// held). Cancelling `shutdown` is the clean stop.
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
        let join = |left| locks.acquire_shared(&presence_key, left);
        let taken = take_lock(join, &presence_key, None, self.patience, shutdown).await?;
        let Some(mut presence) = taken else {
            return Ok(done);
        };
        if let Err(e) = self.check_segment_count().await {
            // The presence hold goes back too; the refusal is what counts.
            let _ = presence.release().await;
            return Err(e);
        }
        let n = self.segments.len();
        let mut slots = Slots::new(n, self.patience);
        // Segment runs count the locks they are granted here (the server
        // answered), so it must outlive them.
        let granted = AtomicU64::new(0);
        let mut running: FuturesUnordered<SegmentRun<'_>> = FuturesUnordered::new();
        let mut shares = Share::new(&self.name, n);
        let mut failure = None;
        let mut tick = tokio::time::interval(self.recheck);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!(projection = %self.name, segments = n, "segmented runner started");
        loop {
            let resume = slots.resume_at();
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some((i, result)) = running.next() => {
                    if let Err(e) = slots.settle(&self.name, i, result, &mut done) {
                        failure = Some(e);
                        break;
                    }
                }
                _ = tick.tick() => {
                    slots.looked();
                    if let Err(e) = self.keep_presence(locks, &mut presence, &mut slots).await {
                        failure = Some(e);
                        break;
                    }
                    let share = shares.look(locks, slots.active().len(), &self.name).await;
                    done.handed_over += slots.give_up_extra(&self.name, share);
                }
                _ = tokio::time::sleep_until(resume.unwrap_or_else(tokio::time::Instant::now)),
                    if resume.is_some() => {}
            }
            if granted.swap(0, Ordering::Relaxed) > 0 {
                slots.answered();
            }
            for i in slots.next_tries(shares.get()) {
                let stop = shutdown.child_token();
                slots.started(i, stop.clone());
                let (runner, granted) = (&self.segments[i], &granted);
                running.push(Box::pin(async move {
                    let locked = || {
                        granted.fetch_add(1, Ordering::Relaxed);
                    };
                    (i, runner.run_locked(locks, &stop, &locked).await)
                }));
            }
        }
        slots.stop_all();
        while let Some((i, result)) = running.next().await {
            if let Err(e) = slots.settle(&self.name, i, result, &mut done) {
                failure.get_or_insert(e);
            }
        }
        shares.release().await;
        // A presence lost with its session (and not taken again) is gone.
        let released = match presence.release().await {
            Err(e) if e.is_lock_lost() => Ok(()),
            other => other,
        };
        tracing::info!(projection = %self.name, applied = done.applied, "segmented runner stopped");
        match failure {
            Some(e) => Err(e),
            None => released.map(|_| done),
        }
    }

    /// Refuses to run when the projection has checkpoints of another
    /// segment count (`{name}/segment-{i}-of-{m}`, `m` not this runner's
    /// count): those of this count would start from position 0 and apply
    /// every event again into the same read model.
    async fn check_segment_count(&self) -> Result<()> {
        let asked = self.segments.len() as u32;
        let prefix = format!("{}/segment-", self.name);
        let backend = self.segments[0].projection().backend();
        let names = backend.checkpoint_names(&prefix).await?;
        let mut others: Vec<(u32, String)> = names
            .into_iter()
            .filter_map(|n| Some((segment_count_of(&n[prefix.len()..])?, n)))
            .filter(|(count, _)| *count != asked)
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        others.sort();
        let found = others[0].0;
        let examples: Vec<&str> = others.iter().take(5).map(|(_, n)| n.as_str()).collect();
        tracing::error!(projection = %self.name, found, asked, "segment count changed: refusing to run");
        Err(ReadModelError::SegmentCountChanged {
            projection: self.name.clone(),
            found,
            examples: examples.join(", "),
            asked,
        }
        .into())
    }

    /// Takes the presence hold again when its session ended (a restart):
    /// otherwise the other runners count one runner less. A connection
    /// failure is booked in `slots` (tried again at the next look).
    async fn keep_presence<L: RunnerCensus>(
        &self,
        locks: &L,
        presence: &mut LockGuard,
        slots: &mut Slots,
    ) -> Result<()> {
        if !presence.is_lost() {
            return Ok(());
        }
        match locks.try_lock_shared(&self.presence_key()).await {
            Ok(Some(again)) => {
                *presence = again;
                slots.answered();
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => slots.failed(&self.name, e),
        }
    }
}

/// The `n` of a segment checkpoint name's tail `{i}-of-{n}`, when it is
/// one (`i` below `n`); `None` for any other name under the prefix.
fn segment_count_of(tail: &str) -> Option<u32> {
    let (index, count) = tail.split_once("-of-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(index) || !digits(count) {
        return None;
    }
    let (index, count) = (index.parse::<u32>().ok()?, count.parse::<u32>().ok()?);
    (index < count).then_some(count)
}

impl<H: ReadModelHandler, B, F: EventFeed> fmt::Debug for SegmentedRunner<H, B, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentedRunner")
            .field("name", &self.name)
            .field("segments", &self.segments.len())
            .field("recheck", &self.recheck)
            .field("reconnect_patience", &self.patience)
            .finish()
    }
}
