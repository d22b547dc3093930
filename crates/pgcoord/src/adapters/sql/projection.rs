//! [`ReadModelProjection`]: runs a [`ReadModelHandler`] over events, one
//! transaction per event with the projection's checkpoint in it, retrying
//! transient failures with jittered exponential backoff; one runner per
//! projection across processes through the lock port.

use std::borrow::Borrow;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::sync::OnceCell;

pub use super::catch_up::CatchUp;
use super::retry::{is_transient, RetryPolicy};
use crate::ports::error::{Error, LockLostError, Result};
use crate::ports::locks::{DistributedLock, LockGuard};
use crate::ports::readmodels::{Applied, ReadModel, ReadModelHandler, TransactionalReadModels};

/// Feeds events to a read model's handler.
///
/// Each event runs in its own transaction on the backend: the handler's
/// writes commit together or not at all. Fed with positions
/// ([`handle_at`](Self::handle_at), [`catch_up`](Self::catch_up),
/// [`run`](Self::run)), the projection keeps a checkpoint under its
/// [name](Self::named) in the same transaction and skips events at or below
/// it, so replaying a feed, or crashing anywhere in it, neither skips nor
/// repeats an event.
///
/// A failure that [`is_transient`] (or the classifier set with
/// [`ReadModelProjection::with_classifier`]) is retried after a jittered,
/// growing backoff, up to the policy's attempts; then, or at once for any
/// other failure, the projection stops with
/// [`ReadModelError::ProjectionFailed`] naming the event's position and the
/// cause. It never retries without waiting.
///
/// The futures of its calls are `Send` on every backend (spawn them, on an
/// `Arc` of the projection): [`prepare`](Self::prepare),
/// [`handle`](Self::handle), [`handle_at`](Self::handle_at),
/// [`apply_batch`](Self::apply_batch), [`checkpoint`](Self::checkpoint)
/// and [`reset`](Self::reset) state it, so it is proved once from the
/// port's bounds rather than for each backend's own futures (where the
/// compiler fails to prove it for the PostgreSQL backend's transactions:
/// "implementation of `PgClientSource` is not general enough");
/// [`catch_up`](Self::catch_up), [`catch_up_batched`](Self::catch_up_batched),
/// [`handle_all`](Self::handle_all) and [`run`](Self::run) are `Send` when
/// the events given are.
///
/// [`ReadModelError::ProjectionFailed`]: crate::ports::readmodels::ReadModelError::ProjectionFailed
pub struct ReadModelProjection<H, B> {
    handler: H,
    backend: B,
    retry: RetryPolicy,
    classify: fn(&Error) -> bool,
    name: String,
    prepared: OnceCell<()>,
}

impl<H, B> ReadModelProjection<H, B>
where
    H: ReadModelHandler,
    B: TransactionalReadModels<H::Model>,
{
    /// A projection with the default retry policy, named after its model's
    /// table.
    pub fn new(handler: H, backend: B) -> Self {
        Self {
            handler,
            backend,
            retry: RetryPolicy::default(),
            classify: is_transient,
            name: H::Model::table_name(),
            prepared: OnceCell::new(),
        }
    }

    /// Names the projection: the key of its checkpoint and of its runner
    /// lock (`projection:{name}`). Default: the model's table name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The projection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key of the lock [`run`](Self::run) holds.
    pub fn lock_key(&self) -> String {
        format!("projection:{}", self.name)
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

    /// Creates what the projection keeps in the database besides the
    /// model's table (the checkpoint table) when it is missing. Runs once
    /// per projection value: the first call that writes a checkpoint
    /// ([`handle_at`](Self::handle_at), [`catch_up`](Self::catch_up),
    /// [`apply_batch`](Self::apply_batch), [`run`](Self::run), ...) runs it,
    /// later calls send nothing. A table that exists is left
    /// alone, so a role with only SELECT, INSERT and UPDATE on tables an
    /// owner created works. Reads ([`checkpoint`](Self::checkpoint)) never
    /// run DDL.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, the table was created or not, and the next
    /// call tries again.
    pub fn prepare(&self) -> impl Future<Output = Result<()>> + Send + '_ {
        self.prepare_once()
    }

    async fn prepare_once(&self) -> Result<()> {
        self.prepared
            .get_or_try_init(|| self.backend.prepare_checkpoints())
            .await
            .map(|_| ())
    }

    /// The retry policy and the classifier of transient errors (for the
    /// runner's feed reads).
    pub(crate) fn retry_policy(&self) -> (&RetryPolicy, fn(&Error) -> bool) {
        (&self.retry, self.classify)
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Applies one event without a checkpoint, retrying transient
    /// failures.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped: the current attempt's transaction rolls
    /// back (earlier attempts had rolled back already) and the event is not
    /// applied. Not cancel safe, as the event is not checkpointed: calling
    /// again after a drop that came after the commit applies it twice.
    pub fn handle<'a>(
        &'a self,
        event: &'a H::Event,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        self.handle_retrying(event)
    }

    async fn handle_retrying(&self, event: &H::Event) -> Result<()> {
        let mut attempt = 1;
        loop {
            match self.backend.apply(&self.handler, event).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < self.retry.max_attempts && (self.classify)(&e) => {
                    self.wait_before_retry(&self.name, attempt, None, &e).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Applies events in order without checkpoints, stopping at the first
    /// failure.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped: events before the current one are
    /// committed, the current one is not. Not cancel safe (see
    /// [`handle`](Self::handle)).
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

    /// Applies the event at `position` with its checkpoint (see
    /// [`TransactionalReadModels::apply_at`]), skipping it when the
    /// checkpoint is at or past `position`. Transient failures are retried
    /// with jittered backoff; the last failure comes back as
    /// [`ReadModelError::ProjectionFailed`](crate::ports::readmodels::ReadModelError::ProjectionFailed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped at any point, the event is either applied and
    /// checkpointed or neither; calling again applies or skips it.
    pub fn handle_at<'a>(
        &'a self,
        position: i64,
        event: &'a H::Event,
    ) -> impl Future<Output = Result<Applied>> + Send + 'a {
        self.handle_at_on(&self.backend, &self.name, position, event)
    }

    /// Applies `(position, event)` pairs in order with checkpoints
    /// (creating the checkpoint table when missing), stopping at the first
    /// failure.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: every event before the current one is applied and
    /// checkpointed, the current one is all or nothing; feeding the same
    /// pairs again resumes where it stopped.
    pub async fn catch_up<I, E>(&self, events: I) -> Result<CatchUp>
    where
        I: IntoIterator<Item = (i64, E)>,
        E: Borrow<H::Event>,
    {
        self.prepare().await?;
        let mut done = CatchUp::default();
        for (position, event) in events {
            match self.handle_at(position, event.borrow()).await? {
                Applied::Applied => done.applied += 1,
                Applied::Skipped => done.skipped += 1,
            }
        }
        Ok(done)
    }

    /// [`catch_up`](Self::catch_up) with `batch` events per transaction
    /// (and one checkpoint write per batch): faster, as a commit is the
    /// costly part. A batch that fails is rolled back and replayed one event
    /// per transaction, so the failure is retried and reported with the
    /// position of the event that caused it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: every batch before the current one is applied and
    /// checkpointed, the current one is all or nothing.
    pub async fn catch_up_batched<I, E>(&self, events: I, batch: usize) -> Result<CatchUp>
    where
        I: IntoIterator<Item = (i64, E)>,
        E: Borrow<H::Event>,
    {
        self.prepare().await?;
        let batch = batch.max(1);
        let mut done = CatchUp::default();
        let mut pending: Vec<(i64, E)> = Vec::with_capacity(batch);
        let mut events = events.into_iter().peekable();
        while events.peek().is_some() {
            pending.clear();
            pending.extend(events.by_ref().take(batch));
            let refs: Vec<(i64, &H::Event)> =
                pending.iter().map(|(p, e)| (*p, e.borrow())).collect();
            let one = self.apply_batch(&refs).await?;
            done.applied += one.applied;
            done.skipped += one.skipped;
        }
        Ok(done)
    }

    /// Applies one batch of `(position, event)` pairs (positions
    /// increasing) in one transaction with one checkpoint write; a batch
    /// that fails is rolled back and replayed one event per transaction
    /// (with retries), so a failure is reported with its event's position.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped during the batch transaction, none of it is
    /// applied; during the replay, the events before the current one are.
    /// Either way, applying the same batch again applies each event once.
    pub fn apply_batch<'a>(
        &'a self,
        events: &'a [(i64, &'a H::Event)],
    ) -> impl Future<Output = Result<CatchUp>> + Send + 'a {
        self.apply_batch_on(&self.backend, &self.name, events)
    }

    /// [`catch_up`](Self::catch_up) as the one runner of this projection:
    /// takes the lock [`lock_key`](Self::lock_key) through `locks` (waiting
    /// up to `wait`), applies the events, and releases it. If the lock is
    /// lost meanwhile, the event in progress rolls back and the run stops
    /// with [`Error::LockLost`]; another runner may have taken over.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`catch_up`](Self::catch_up); the lock is released
    /// when the future is dropped.
    pub async fn run<L, I, E>(
        &self,
        locks: &L,
        wait: Option<Duration>,
        events: I,
    ) -> Result<CatchUp>
    where
        L: DistributedLock,
        I: IntoIterator<Item = (i64, E)>,
        E: Borrow<H::Event>,
    {
        let key = self.lock_key();
        let guard = locks.acquire(&key, wait).await?;
        self.prepare().await?;
        let lost = || {
            lock_lost(
                &key,
                &guard,
                &format!("the runner of projection {:?}", self.name),
            )
        };
        let mut done = CatchUp::default();
        for (position, event) in events {
            if guard.is_lost() {
                return Err(lost());
            }
            let applied = tokio::select! {
                biased;
                _ = guard.lost() => return Err(lost()),
                applied = self.handle_at(position, event.borrow()) => applied?,
            };
            match applied {
                Applied::Applied => done.applied += 1,
                Applied::Skipped => done.skipped += 1,
            }
        }
        guard.release().await?;
        Ok(done)
    }

    /// The projection's checkpoint: the last position applied, `None`
    /// before the first (or when the checkpoint table does not exist yet).
    /// One read; no DDL.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub fn checkpoint(&self) -> impl Future<Output = Result<Option<i64>>> + Send + '_ {
        self.backend.checkpoint(&self.name)
    }

    /// Empties the read model's table and removes the projection's
    /// checkpoint, in one transaction (for a rebuild); returns the number
    /// of rows removed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, both or neither went.
    pub fn reset(&self) -> impl Future<Output = Result<u64>> + Send + '_ {
        self.reset_prepared()
    }

    async fn reset_prepared(&self) -> Result<u64> {
        self.prepare().await?;
        self.backend.reset(&self.name).await
    }
}

impl<H, B> fmt::Debug for ReadModelProjection<H, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadModelProjection")
            .field("name", &self.name)
            .field("handler", &std::any::type_name::<H>())
            .field("backend", &std::any::type_name::<B>())
            .field("retry", &self.retry)
            .finish()
    }
}

/// The error of a run whose lock `guard` was lost: why, when the loss
/// signal knows (the in-memory manager's does not), then that `who`
/// stopped.
pub(super) fn lock_lost(key: &str, guard: &LockGuard, who: &str) -> Error {
    let stopped = format!("{who} stopped");
    Error::LockLost(LockLostError {
        key: key.to_owned(),
        reason: match guard.loss_signal().reason() {
            Some(why) => format!("{why}; {stopped}"),
            None => stopped,
        },
    })
}
