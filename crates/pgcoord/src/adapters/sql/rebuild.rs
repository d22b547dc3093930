//! [`ProjectionRebuild`]: builds a new version of a projection's table from
//! the start of the feed while the live version keeps serving reads, then
//! switches readers to it in one transaction.

use std::fmt;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::batch_idle::BatchIdle;
use super::progress_samples::ProgressSamples;
use super::projection::{lock_lost, ReadModelProjection};
use super::runner::DEFAULT_BATCH_SIZE;
use crate::ports::error::{Error, Result};
use crate::ports::locks::{DistributedLock, LockGuard};
use crate::ports::readmodels::{
    during_warm_up, version_name, with_batch_idle_bound, CheckpointPublisher, EventFeed,
    FeedWakeup, ProjectionProgress, ProjectionVersions, ReadModelHandler, VersionSwitch,
    VersionedReadModels,
};

/// What a rebuild run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RebuildSummary {
    /// The version built.
    pub version: u32,
    /// Events applied to it by this run.
    pub applied: u64,
    /// Its checkpoint when the run stopped (after a switch: the live
    /// checkpoint it took over with).
    pub checkpoint: Option<i64>,
    /// True when the run switched readers to the new version; false when
    /// it stopped on its shutdown token first (run again to resume).
    pub switched: bool,
}

/// Rebuilds a projection without downtime (PostgreSQL; see
/// `docs/projections.md`, "Rebuilding without downtime"):
///
/// 1. starts (or resumes) version `N` of the projection's table, `t_vN`,
///    beside the live `t`, and takes that version's runner lock
///    (`projection:{name}@vN`; the live runner keeps `projection:{name}`);
/// 2. warms it up: applies the feed from the start to its own checkpoint
///    (`{name}@vN`), with [`warming_up`](crate::ports::readmodels::warming_up)
///    true for the handler, until the feed has nothing more and the
///    version is at least at the live checkpoint (a feed of its own may
///    hand out the live runner's last events a moment later: an event
///    table holds positions back until the transactions that could still
///    write below them have ended; the rebuild waits for the feed's
///    signal then, and fails only when the feed's head ends before the
///    live checkpoint);
/// 3. opens the switch: one transaction that locks the live checkpoint
///    (the live runner's next batch waits), applies the events between the
///    two checkpoints to `t_vN`, renames `t` to `t_v{N-1}` and `t_vN` to
///    `t`, moves the live checkpoint, and commits. Readers see the old
///    table until the commit and the complete new one after it; the live
///    runner goes on from the checkpoint, on the new table. The new
///    table takes over the old one's grants in that transaction. When the
///    feed does not yet hand out every event up to the live checkpoint,
///    the switch rolls back (the live runner goes on) and step 2 goes on.
///
/// The old table is kept until [`drop_retired`](Self::drop_retired).
pub struct ProjectionRebuild<H: ReadModelHandler, B, F> {
    pub(super) projection: ReadModelProjection<H, B>,
    pub(super) feed: F,
    pub(super) batch_size: usize,
    lock_wait: Option<Duration>,
    pub(super) publisher: CheckpointPublisher,
    pub(super) samples: ProgressSamples,
    batch_idle: BatchIdle,
}

impl<H, B, F> ProjectionRebuild<H, B, F>
where
    H: ReadModelHandler,
    B: VersionedReadModels<H::Model>,
    F: EventFeed<Event = H::Event>,
{
    /// A rebuild of `projection` (its name, handler and backend, as the
    /// live runner has them) from `feed`: 100 events per batch, waits for
    /// the version's lock as long as it takes.
    pub fn new(projection: ReadModelProjection<H, B>, feed: F) -> Self {
        Self {
            projection,
            feed,
            batch_size: DEFAULT_BATCH_SIZE,
            lock_wait: None,
            publisher: CheckpointPublisher::new(),
            samples: ProgressSamples::default(),
            batch_idle: BatchIdle::default(),
        }
    }

    /// How long one of the rebuild's transactions (a batch, the switch) may
    /// sit idle between two statements before the server ends it, as
    /// [`ProjectionRunner::batch_idle_timeout`](super::ProjectionRunner::batch_idle_timeout)
    /// says (a frozen rebuild would otherwise hold back the live runner's
    /// feed, and in its switch the live checkpoint). `None`: no bound.
    /// Default: the version lock's lease, else 60 s.
    pub fn batch_idle_timeout(mut self, bound: Option<Duration>) -> Self {
        self.batch_idle = BatchIdle::from_option(bound);
        self
    }

    /// Events per transaction (at least 1).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// How long [`run`](Self::run) waits for the version's lock (`None`,
    /// the default: as long as it takes).
    pub fn lock_wait(mut self, wait: Option<Duration>) -> Self {
        self.lock_wait = wait;
        self
    }

    /// The projection rebuilt.
    pub fn projection(&self) -> &ReadModelProjection<H, B> {
        &self.projection
    }

    /// A view of the checkpoints the rebuild commits to the new version.
    pub fn progress(&self) -> ProjectionProgress {
        self.publisher.progress()
    }

    /// The projection's versions.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub async fn versions(&self) -> Result<ProjectionVersions> {
        self.projection
            .backend()
            .versions(self.projection.name())
            .await
    }

    /// Builds the new version and switches to it (see the type), or, when
    /// `shutdown` is cancelled first, stops after the batch in progress
    /// (`switched: false`; the next run resumes). Fails with
    /// [`Error::LockLost`] when the version's lock is lost.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe while it waits for the lock (a dropped run loses its
    /// place in the queue). Once it holds it, dropping the future loses
    /// nothing: the batch in progress rolls back (an open switch too, and
    /// the live runner goes on), the lock is released, and the next run
    /// resumes at the version's checkpoint. The live version is never
    /// touched before the switch commits.
    ///
    /// The future is `Send` (spawn it), proved once for every backend from
    /// the port's bounds.
    pub fn run<'a, L: DistributedLock>(
        &'a self,
        locks: &'a L,
        shutdown: &'a CancellationToken,
    ) -> impl std::future::Future<Output = Result<RebuildSummary>> + Send + 'a {
        self.run_locked(locks, shutdown)
    }

    async fn run_locked<L: DistributedLock>(
        &self,
        locks: &L,
        shutdown: &CancellationToken,
    ) -> Result<RebuildSummary> {
        let name = self.projection.name();
        self.projection.prepare().await?;
        let backend = self.projection.backend();
        let version = backend.start_version(name).await?;
        let mut done = RebuildSummary {
            version,
            ..RebuildSummary::default()
        };
        let key = format!("projection:{}", version_name(name, version));
        let guard = tokio::select! {
            guard = locks.acquire(&key, self.lock_wait) => guard?,
            _ = shutdown.cancelled() => return Ok(done),
        };
        let lost = || lock_lost(&key, &guard, &format!("the rebuild of projection {name:?}"));
        if backend.versions(name).await?.building != Some(version) {
            guard.release().await?;
            return Err(Error::InvalidArgument(format!(
                "version {version} of projection {name:?} was switched to or abandoned \
                 while this rebuild waited for its lock"
            )));
        }
        let target = backend.at_version(version)?;
        let vname = version_name(name, version);
        let mut checkpoint = target.checkpoint(&vname).await?;
        self.publisher.publish_read(checkpoint);
        self.samples.restart();
        tracing::info!(projection = %name, version, ?checkpoint, "projection rebuild started");
        let bound = self.batch_idle.resolve(&guard);
        let switched = with_batch_idle_bound(
            bound,
            during_warm_up(async {
                let mut wakeup = self.feed.signal().map(|s| s.subscribe());
                loop {
                    // Warm up until the feed has nothing more and the version
                    // is at least where the live one is.
                    loop {
                        if shutdown.is_cancelled() {
                            return Ok(false);
                        }
                        let step = self
                            .catch_up_step(&guard, &lost, &target, &vname, checkpoint, None)
                            .await?;
                        if let Some(step) = step {
                            done.applied += step.0;
                            checkpoint = step.1;
                            continue;
                        }
                        let live = guarded(&guard, &lost, self.projection.checkpoint()).await?;
                        if live <= checkpoint {
                            break;
                        }
                        // The live runner applied events this feed does not
                        // hand out yet (an event table's positions wait until
                        // every transaction that could still write below them
                        // has ended, and this feed has only just looked).
                        let stop = self
                            .wait_for_feed(&guard, &lost, &mut wakeup, shutdown, checkpoint, live)
                            .await?;
                        if stop {
                            return Ok(false);
                        }
                    }
                    let switch =
                        guarded(&guard, &lost, backend.begin_switch(name, version)).await?;
                    let live = switch.live_checkpoint();
                    let mut short = false;
                    while checkpoint < live {
                        let step = self
                            .catch_up_step(&guard, &lost, &target, &vname, checkpoint, live)
                            .await?;
                        let Some(step) = step else {
                            short = true;
                            break;
                        };
                        done.applied += step.0;
                        checkpoint = step.1;
                    }
                    if short {
                        // Not all of the events up to the live checkpoint are
                        // handed out yet: roll the switch back (the live
                        // runner goes on) and warm up again.
                        drop(switch);
                        continue;
                    }
                    guarded(&guard, &lost, switch.commit(checkpoint)).await?;
                    checkpoint = checkpoint.max(live);
                    return Ok::<_, Error>(true);
                }
            }),
        )
        .await?;
        done.checkpoint = checkpoint;
        done.switched = switched;
        tracing::info!(projection = %name, version, ?checkpoint, switched, applied = done.applied,
            "projection rebuild stopped");
        guard.release().await?;
        Ok(done)
    }

    /// Drops the building version (its table and checkpoint) so that the
    /// next [`run`](Self::run) starts over from position 0; returns the
    /// version dropped. Takes the version's lock first (waiting as
    /// [`lock_wait`](Self::lock_wait) says), so a running rebuild is not
    /// pulled from under itself. The live version is not touched.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe while it waits for the lock; after it, one
    /// transaction (dropped: abandoned or not).
    pub async fn abandon<L: DistributedLock>(&self, locks: &L) -> Result<Option<u32>> {
        let name = self.projection.name();
        let backend = self.projection.backend();
        let Some(version) = backend.versions(name).await?.building else {
            return Ok(None);
        };
        let key = format!("projection:{}", version_name(name, version));
        let guard = locks.acquire(&key, self.lock_wait).await?;
        let dropped = backend.abandon_version(name).await?;
        guard.release().await?;
        Ok(dropped)
    }

    /// Drops the tables of the versions switched away from; returns their
    /// versions.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one transaction.
    pub async fn drop_retired(&self) -> Result<Vec<u32>> {
        self.projection
            .backend()
            .drop_retired(self.projection.name())
            .await
    }
}

impl<H, B, F> ProjectionRebuild<H, B, F>
where
    H: ReadModelHandler,
    B: VersionedReadModels<H::Model>,
    F: EventFeed<Event = H::Event>,
{
    /// Waits until the feed may hand out more events (its signal; a short
    /// pause for a feed without one), when the feed's head says there are
    /// events past `checkpoint`; fails when it says the feed ends before
    /// the `live` checkpoint. True when `shutdown` came first.
    async fn wait_for_feed(
        &self,
        guard: &LockGuard,
        lost: &impl Fn() -> Error,
        wakeup: &mut Option<FeedWakeup>,
        shutdown: &CancellationToken,
        checkpoint: Option<i64>,
        live: Option<i64>,
    ) -> Result<bool> {
        let name = self.projection.name();
        let head = guarded(guard, lost, self.feed.head()).await?;
        if head.is_some_and(|h| Some(h) <= checkpoint) {
            return Err(feed_ended(name, checkpoint, live));
        }
        tracing::debug!(projection = %name, ?checkpoint, ?live,
            "projection rebuild: waiting for the feed to hand out the live runner's events");
        let woken = async {
            match wakeup {
                Some(w) => w.changed().await,
                None => tokio::time::sleep(UNSIGNALLED_RECHECK).await,
            }
        };
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => Ok(true),
            _ = guard.lost() => Err(lost()),
            _ = woken => Ok(false),
        }
    }
}

/// How soon a rebuild looks again at a feed without a signal that holds
/// back events the live runner already applied.
const UNSIGNALLED_RECHECK: Duration = Duration::from_millis(50);

fn feed_ended(name: &str, checkpoint: Option<i64>, live: Option<i64>) -> Error {
    Error::InvalidArgument(format!(
        "rebuilding projection {name:?}: the feed ends at {checkpoint:?}, before the live \
         checkpoint {live:?}"
    ))
}

impl<H: ReadModelHandler, B, F> fmt::Debug for ProjectionRebuild<H, B, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectionRebuild")
            .field("projection", &self.projection)
            .field("feed", &std::any::type_name::<F>())
            .field("batch_size", &self.batch_size)
            .field("lock_wait", &self.lock_wait)
            .finish()
    }
}

/// Runs `work` unless the lock is lost first (then `work` is dropped: its
/// transaction rolls back).
pub(super) async fn guarded<T>(
    guard: &LockGuard,
    lost: &impl Fn() -> Error,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    if guard.is_lost() {
        return Err(lost());
    }
    tokio::select! {
        biased;
        _ = guard.lost() => Err(lost()),
        r = work => r,
    }
}
