//! [`ProjectionRunner`]: tails an [`EventFeed`] into a
//! [`ReadModelProjection`], as the one runner of the projection.

use std::fmt;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::batch_idle::BatchIdle;
use super::dead_letter_policy::DeadLetterPolicy;
use super::outage::{take_lock, DEFAULT_RECONNECT_PATIENCE};
use super::progress_samples::ProgressSamples;
use super::projection::{lock_lost, ReadModelProjection};
use super::runner_metrics;
use crate::ports::error::{Error, Result};
use crate::ports::locks::{DistributedLock, LockGuard};
use crate::ports::readmodels::{
    with_batch_idle_bound, CheckpointPublisher, EventFeed, ProjectionProgress, ReadModelHandler,
    TransactionalReadModels,
};

/// The default number of events applied per transaction.
pub const DEFAULT_BATCH_SIZE: usize = 100;

/// What a run did before it stopped on its shutdown token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Events applied (and checkpointed) by this run.
    pub applied: u64,
    /// Batches committed by this run.
    pub batches: u64,
    /// Events parked in the dead-letter table by this run (with a
    /// [`DeadLetterPolicy`]).
    pub parked: u64,
    /// The committed checkpoint when the run stopped (`None`: no event yet,
    /// or the run stopped before it held the lock).
    pub checkpoint: Option<i64>,
}

/// Runs a projection from a feed for as long as it is allowed to:
///
/// 1. takes the projection's runner lock (`projection:{name}`) through any
///    [`DistributedLock`] and holds it for the whole run, so one runner
///    applies events at a time across every process (while it waits, a
///    connection failure is tried again: see
///    [`reconnect_patience`](Self::reconnect_patience));
/// 2. prepares the checkpoint table (once) and reads the checkpoint;
/// 3. reads up to [`batch_size`](Self::batch_size) events after it
///    (transient read failures are retried with the projection's retry
///    policy) and
///    applies them with the new checkpoint in one transaction (see
///    [`ReadModelProjection::apply_batch`]: transient failures are
///    retried, a failure that stays is returned as
///    [`ReadModelError::ProjectionFailed`](crate::ports::readmodels::ReadModelError::ProjectionFailed));
/// 4. when the feed has nothing new, waits for the feed's
///    [signal](EventFeed::signal) (or, as a fallback, the
///    [idle interval](Self::idle_interval)) — it never polls in a loop;
/// 5. stops when the shutdown token is cancelled (after the batch in
///    progress commits) or when the lock is lost (the batch in progress
///    rolls back; the run returns [`Error::LockLost`]). The next runner
///    starts at the committed checkpoint: no event is applied twice or
///    skipped.
///
/// Every committed checkpoint is published to [`progress`](Self::progress),
/// for [`ProjectionProgress::wait_for`] (read-your-writes in this
/// process). Several runners in one process share one lock manager and one
/// database pool: give each its own projection name.
///
/// Without a [`DeadLetterPolicy`] a failure that stays stops the run; with
/// one ([`with_dead_letters`](Self::with_dead_letters)) a poison event is
/// parked and the run goes on (see `docs/projections.md`, "Poison events").
pub struct ProjectionRunner<H: ReadModelHandler, B, F> {
    pub(super) projection: ReadModelProjection<H, B>,
    pub(super) feed: F,
    batch_size: usize,
    idle_interval: Option<Duration>,
    lock_wait: Option<Duration>,
    patience: Duration,
    publisher: CheckpointPublisher,
    dead_letters: Option<DeadLetterPolicy<H::Event>>,
    batch_idle: BatchIdle,
}

impl<H, B, F> ProjectionRunner<H, B, F>
where
    H: ReadModelHandler,
    B: TransactionalReadModels<H::Model>,
    F: EventFeed<Event = H::Event>,
{
    /// A runner of `projection` over `feed`: 100 events per batch, waits
    /// for the lock as long as it takes, reads again after 5 s without a
    /// signal.
    pub fn new(projection: ReadModelProjection<H, B>, feed: F) -> Self {
        Self {
            projection,
            feed,
            batch_size: DEFAULT_BATCH_SIZE,
            idle_interval: Some(Duration::from_secs(5)),
            lock_wait: None,
            patience: DEFAULT_RECONNECT_PATIENCE,
            publisher: CheckpointPublisher::new(),
            dead_letters: None,
            batch_idle: BatchIdle::default(),
        }
    }

    /// How long a batch transaction may sit idle between two statements
    /// (a handler awaiting something else, a frozen process) before the
    /// server ends it (`SET LOCAL idle_in_transaction_session_timeout`, on
    /// PostgreSQL): an open batch transaction holds back every
    /// `PostgresEventTable` feed of the server and keeps its rows locked,
    /// so a frozen runner would stall the runner that took over. A batch
    /// so ended fails (nothing of it applied) and is tried again as any
    /// failed batch. `None` (or zero): no bound. Default: the lock's
    /// lease when it has one (what the lease is known to hold when the
    /// lock is taken, rounded up to a second), else
    /// [`DEFAULT_BATCH_IDLE_TIMEOUT`](super::DEFAULT_BATCH_IDLE_TIMEOUT)
    /// (60 s).
    pub fn batch_idle_timeout(mut self, bound: Option<Duration>) -> Self {
        self.batch_idle = BatchIdle::from_option(bound);
        self
    }

    /// Parks poison events in the dead-letter table instead of stopping
    /// (the PostgreSQL backend keeps them; the table is created when the
    /// run starts). Parked events are listed, replayed through the handler
    /// and dropped with [`list_dead_letters`](Self::list_dead_letters),
    /// [`replay_dead_letters`](Self::replay_dead_letters) and
    /// [`drop_dead_letters`](Self::drop_dead_letters); the run replays
    /// those marked for replay (`eventsource projection dlq replay`) before
    /// each batch.
    pub fn with_dead_letters(mut self, policy: DeadLetterPolicy<H::Event>) -> Self {
        self.dead_letters = Some(policy);
        self
    }

    /// Events per transaction (at least 1).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// How long the runner waits, with nothing new, before it reads the
    /// feed again even without a signal (`None`: only on a signal; refused
    /// by [`run`](Self::run) for a feed without one). A fallback for
    /// notifications a feed cannot give (a PostgreSQL event-table write
    /// that rolled back sends none). Default: 5 s.
    pub fn idle_interval(mut self, every: Option<Duration>) -> Self {
        self.idle_interval = every;
        self
    }

    /// How long [`run`](Self::run) waits for the runner lock (`None`, the
    /// default: as long as it takes, e.g. a standby runner waiting to take
    /// over).
    pub fn lock_wait(mut self, wait: Option<Duration>) -> Self {
        self.lock_wait = wait;
        self
    }

    /// How long [`run`](Self::run), waiting for the runner lock, keeps
    /// trying through connection failures (a database restarting, away):
    /// each is tried again after a pause of 100 ms doubling to 5 s, with
    /// jitter, within the [lock wait](Self::lock_wait); failures that last
    /// this long end the run with the last one. Default: 60 s
    /// ([`DEFAULT_RECONNECT_PATIENCE`](super::DEFAULT_RECONNECT_PATIENCE)),
    /// so a standby outlives a restart. Once the lock is held, a lost
    /// session is a lost lock ([`Error::LockLost`]), as before.
    pub fn reconnect_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// The projection run.
    pub fn projection(&self) -> &ReadModelProjection<H, B> {
        &self.projection
    }

    /// The feed read.
    pub fn feed(&self) -> &F {
        &self.feed
    }

    /// A view of the checkpoints this runner commits (see
    /// [`ProjectionProgress::wait_for`]).
    pub fn progress(&self) -> ProjectionProgress {
        self.publisher.progress()
    }

    /// Runs until `shutdown` is cancelled (`Ok`) or the lock is lost
    /// ([`Error::LockLost`]) or a failure stays after its retries (the
    /// error). While it waits for the lock, connection failures are tried
    /// again for up to the [reconnect patience](Self::reconnect_patience),
    /// so a standby outlives a database restart. See the type's
    /// documentation for the loop.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe while it waits for the runner lock: a dropped run
    /// loses its place in the lock's queue, as
    /// [`DistributedLock::acquire`] does (dropped in a pause after a
    /// connection failure, it had no place to lose). Once it holds the lock, dropping
    /// the future loses nothing: the batch in progress rolls back, the
    /// lock is released, and the next run resumes at the committed
    /// checkpoint. Nothing leaks either way. Cancelling `shutdown` is the
    /// clean stop: the batch in progress commits first.
    ///
    /// The future is `Send` (spawn it); its `Send` bound is stated here, so
    /// that it is proved once for every backend from the port's bounds.
    pub fn run<'a, L: DistributedLock>(
        &'a self,
        locks: &'a L,
        shutdown: &'a CancellationToken,
    ) -> impl std::future::Future<Output = Result<RunSummary>> + Send + 'a {
        self.run_locked(locks, shutdown, &|| {})
    }

    /// [`run`](Self::run), calling `locked` once the lock is taken.
    pub(super) async fn run_locked<L: DistributedLock>(
        &self,
        locks: &L,
        shutdown: &CancellationToken,
        locked: &(dyn Fn() + Send + Sync),
    ) -> Result<RunSummary> {
        let wake = self.feed.signal();
        if wake.is_none() && self.idle_interval.is_none() {
            return Err(Error::InvalidArgument(
                "a feed without a signal needs an idle interval to read again".into(),
            ));
        }
        let key = self.projection.lock_key();
        let mut done = RunSummary::default();
        let acquire = |left| locks.acquire(&key, left);
        let taken = take_lock(acquire, &key, self.lock_wait, self.patience, shutdown).await?;
        let Some(guard) = taken else {
            return Ok(done);
        };
        locked();
        let lost = || {
            let who = format!("the runner of projection {:?}", self.projection.name());
            lock_lost(&key, &guard, &who)
        };
        let name = self.projection.name();
        let bound = self.batch_idle.resolve(&guard);
        let mut checkpoint = self
            .guarded(&guard, &lost, async {
                self.projection.prepare().await?;
                if self.dead_letters.is_some() {
                    self.projection.backend().prepare_dead_letters().await?;
                }
                self.projection.checkpoint().await
            })
            .await?;
        done.checkpoint = checkpoint;
        self.publisher.publish_read(checkpoint);
        let mut wakeup = wake.map(|s| s.subscribe());
        let samples = ProgressSamples::default();
        if self.dead_letters.is_some() {
            self.guarded(&guard, &lost, self.count_parked()).await?;
        }
        tracing::info!(projection = %name, ?checkpoint, "projection runner started");
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            if self.dead_letters.is_some() {
                self.replay_requested(&guard, &lost).await?;
            }
            let batch = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                batch = self.guarded(&guard, &lost, self.read(checkpoint)) => batch?,
            };
            if batch.is_empty() {
                // Caught up with what the feed gives: the lag as it stands.
                if let Some(head) = self.guarded(&guard, &lost, self.feed.head()).await? {
                    runner_metrics::lag(name, (head - checkpoint.unwrap_or(0)).max(0));
                }
                let idle = async {
                    match (&mut wakeup, self.idle_interval) {
                        (Some(w), Some(every)) => {
                            let _ = tokio::time::timeout(every, w.changed()).await;
                        }
                        (Some(w), None) => w.changed().await,
                        (None, every) => tokio::time::sleep(every.unwrap_or_default()).await,
                    }
                };
                tokio::select! {
                    biased;
                    _ = guard.lost() => return Err(lost()),
                    _ = shutdown.cancelled() => break,
                    _ = idle => {}
                }
                continue;
            }
            // The sample goes before the batch, so that the batch counts.
            let sampled = samples.due(checkpoint, batch[0].0);
            if let Some(from) = sampled {
                let record = self.projection.backend().record_progress(name, from);
                self.guarded(&guard, &lost, record).await?;
            }
            let started = Instant::now();
            let refs: Vec<(i64, &H::Event)> = batch.iter().map(|(p, e)| (*p, e)).collect();
            let last = refs.last().map(|(p, _)| *p);
            let applied = match &self.dead_letters {
                None => {
                    let batch = with_batch_idle_bound(bound, self.projection.apply_batch(&refs));
                    self.guarded(&guard, &lost, batch).await?.applied
                }
                Some(policy) => {
                    let step = with_batch_idle_bound(bound, self.apply_parking(policy, &batch));
                    let step = self.guarded(&guard, &lost, step).await?;
                    if step.parked > 0 {
                        done.parked += step.parked;
                        runner_metrics::parked_now(name, step.parked);
                        self.guarded(&guard, &lost, self.count_parked()).await?;
                    }
                    step.applied
                }
            };
            checkpoint = last.max(checkpoint);
            done.applied += applied;
            done.batches += 1;
            done.checkpoint = checkpoint;
            self.publisher.publish(checkpoint);
            runner_metrics::batch(name, applied, started.elapsed());
            if let (Some(_), Some(cp)) = (sampled, checkpoint) {
                if let Some(head) = self.guarded(&guard, &lost, self.feed.head()).await? {
                    runner_metrics::lag(name, (head - cp).max(0));
                }
            }
        }
        tracing::info!(projection = %name, ?checkpoint, applied = done.applied, "projection runner stopped");
        guard.release().await?;
        Ok(done)
    }

    /// [`publish_parked`](Self::publish_parked), for [`guarded`](Self::guarded).
    async fn count_parked(&self) -> Result<()> {
        self.publish_parked().await;
        Ok(())
    }

    /// Reads the next batch, retrying transient failures (a lost
    /// connection, a restarting server) with the projection's retry policy.
    async fn read(&self, after: Option<i64>) -> Result<Vec<(i64, H::Event)>> {
        let (policy, transient) = self.projection.retry_policy();
        let mut attempt = 1;
        loop {
            match self.feed.read_after(after, self.batch_size).await {
                Ok(batch) => return Ok(batch),
                Err(e) if attempt < policy.max_attempts && transient(&e) => {
                    let wait = policy.jittered_backoff(attempt);
                    runner_metrics::retried(self.projection.name());
                    tracing::warn!(projection = %self.projection.name(), attempt, ?wait, error = %e,
                        "projection runner: reading the feed failed, retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `work` unless the lock is lost first (then `work` is dropped:
    /// its transaction rolls back).
    pub(super) async fn guarded<T>(
        &self,
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
}

impl<H: ReadModelHandler, B, F> fmt::Debug for ProjectionRunner<H, B, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectionRunner")
            .field("projection", &self.projection)
            .field("feed", &std::any::type_name::<F>())
            .field("batch_size", &self.batch_size)
            .field("idle_interval", &self.idle_interval)
            .field("lock_wait", &self.lock_wait)
            .field("reconnect_patience", &self.patience)
            .field("dead_letters", &self.dead_letters)
            .field("batch_idle", &self.batch_idle)
            .finish()
    }
}
