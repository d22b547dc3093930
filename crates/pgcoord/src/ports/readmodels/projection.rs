//! The projection contract: [`ReadModelHandler`] (what a read model does
//! with an event) and [`TransactionalReadModels`] (a backend that can run a
//! handler inside one transaction).

use std::future::Future;

use super::dead_letter::{
    unsupported, DeadLetter, DeadLetterSelection, HeldBatch, HoldingBatch, Parking,
};
use super::model::ReadModel;
use super::repository::ReadModelRepository;
use crate::ports::error::Result;

/// Feeds events into a read model.
///
/// The handler is generic over the repository, so the same handler runs on
/// the in-memory adapter in unit tests and on a SQL adapter in production;
/// the projection hands it a repository bound to one transaction per event.
///
/// ```
/// use pgcoord::readmodels::{ReadModelHandler, ReadModelRepository};
/// # use pgcoord::readmodels::{FieldDescriptor, FieldType, ReadModel, ReadModelMeta};
/// # #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
/// # struct Counter { #[serde(flatten)] meta: ReadModelMeta, hits: i64 }
/// # impl ReadModel for Counter {
/// #     fn fields() -> Vec<FieldDescriptor> { vec![FieldDescriptor::new("hits", FieldType::Integer)] }
/// #     fn meta(&self) -> &ReadModelMeta { &self.meta }
/// #     fn meta_mut(&mut self) -> &mut ReadModelMeta { &mut self.meta }
/// # }
/// struct Hit(uuid::Uuid);
/// struct CountHits;
///
/// impl ReadModelHandler for CountHits {
///     type Model = Counter;
///     type Event = Hit;
///     async fn handle<R: ReadModelRepository<Counter>>(
///         &self,
///         event: &Hit,
///         repo: &R,
///     ) -> pgcoord::Result<()> {
///         let mut counter = repo.get(event.0).await?.unwrap_or(Counter {
///             meta: ReadModelMeta::new(event.0),
///             hits: 0,
///         });
///         counter.hits += 1;
///         repo.save(&counter).await?;
///         Ok(())
///     }
/// }
/// ```
pub trait ReadModelHandler: Send + Sync {
    /// The read model written.
    type Model: ReadModel;
    /// The event type consumed (often the domain's event enum).
    type Event: Send + Sync;

    /// Applies one event. An `Err` rolls the event's transaction back.
    ///
    /// # Cancel safety
    ///
    /// The projection runs the handler inside a transaction: dropped before
    /// the commit, none of its writes persist.
    fn handle<R>(&self, event: &Self::Event, repo: &R) -> impl Future<Output = Result<()>> + Send
    where
        R: ReadModelRepository<Self::Model>;
}

/// What became of an event fed at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The handler ran and its writes committed with the new checkpoint.
    Applied,
    /// The position was at or below the projection's checkpoint: nothing ran.
    Skipped,
}

/// A backend that runs a handler with a repository bound to one
/// transaction, and keeps projection checkpoints in the same database.
/// Implemented by every read-model adapter.
///
/// The checkpoint of a projection (by name) is the highest position whose
/// event has been applied. [`apply_at`](Self::apply_at) reads it, runs the
/// handler and advances it in one transaction, so a crash between any two
/// statements neither loses nor repeats an event.
pub trait TransactionalReadModels<M: ReadModel>: Send + Sync {
    /// Opens a transaction, runs `handler` on `event` with a repository
    /// bound to it, and commits when the handler succeeds; rolls back and
    /// returns the handler's error otherwise.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped: before the commit, the transaction rolls
    /// back and nothing of the event persists.
    fn apply<H>(&self, handler: &H, event: &H::Event) -> impl Future<Output = Result<()>> + Send
    where
        H: ReadModelHandler<Model = M>;

    /// Removes every row of the model's table; returns how many went.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the table was emptied or not.
    fn truncate_all(&self) -> impl Future<Output = Result<u64>> + Send;

    /// Creates the checkpoint table when it is missing.
    ///
    /// # Cancel safety
    ///
    /// One idempotent statement: dropped, the table exists or not; call
    /// again.
    fn prepare_checkpoints(&self) -> impl Future<Output = Result<()>> + Send;

    /// The checkpoint of `projection`, `None` before its first event.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn checkpoint(&self, projection: &str) -> impl Future<Output = Result<Option<i64>>> + Send;

    /// The names of the projections with a checkpoint whose name starts
    /// with `prefix`, sorted (none before the checkpoint table exists). A
    /// [`SegmentedRunner`](crate::readmodels::SegmentedRunner) reads it to
    /// refuse a segment count other than the one its checkpoints have. The
    /// default finds none (every backend of this crate implements it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn checkpoint_names(&self, prefix: &str) -> impl Future<Output = Result<Vec<String>>> + Send {
        let _ = prefix;
        std::future::ready(Ok(Vec::new()))
    }

    /// In one transaction: skips the event when `position` is at or below
    /// `projection`'s checkpoint; otherwise runs `handler` on it and sets
    /// the checkpoint to `position`, committing both together.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before the commit, the transaction rolls back
    /// and the event is neither applied nor checkpointed; dropped after, it
    /// is both. Either way, calling again with the same position does the
    /// right thing (applies it, or skips it).
    fn apply_at<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> impl Future<Output = Result<Applied>> + Send
    where
        H: ReadModelHandler<Model = M>;

    /// In one transaction: reads `projection`'s checkpoint once, runs
    /// `handler` on each event whose position is beyond it (positions must
    /// increase), and sets the checkpoint to the last position applied.
    /// Returns how many events ran. A failure of any event rolls the whole
    /// batch back.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before the commit, none of the batch is applied
    /// or checkpointed; after it, all of it is.
    fn apply_batch_at<H>(
        &self,
        projection: &str,
        events: &[(i64, &H::Event)],
        handler: &H,
    ) -> impl Future<Output = Result<u64>> + Send
    where
        H: ReadModelHandler<Model = M>;

    /// Records a sample of `projection`'s checkpoint for the events/s figure
    /// of a status report (the PostgreSQL backend keeps the last minute's
    /// samples; the default keeps nothing).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one idempotent write, or nothing.
    fn record_progress(
        &self,
        projection: &str,
        position: i64,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (projection, position);
        std::future::ready(Ok(()))
    }

    /// In one transaction: removes every row of the model's table and
    /// `projection`'s checkpoint (for a rebuild); returns the rows removed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, both or neither went.
    fn reset(&self, projection: &str) -> impl Future<Output = Result<u64>> + Send;

    /// Creates the dead-letter table when it is missing (once, before a
    /// runner with a dead-letter policy starts). The default: this backend
    /// keeps no dead letters (an error).
    ///
    /// # Cancel safety
    ///
    /// One idempotent statement: dropped, the table exists or not.
    fn prepare_dead_letters(&self) -> impl Future<Output = Result<()>> + Send {
        std::future::ready(Err(unsupported()))
    }

    /// [`apply_batch_at`](Self::apply_batch_at) that, with
    /// `batch.sequenced`, parks (instead of applying) each event whose
    /// partition already has a parked event of `projection` (reason
    /// `behind position N`), in the same transaction as the applied events
    /// and the checkpoint.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before the commit, nothing of the batch is
    /// applied, parked or checkpointed; after it, all of it is.
    fn apply_batch_holding<H>(
        &self,
        projection: &str,
        batch: &HoldingBatch<'_, H::Event>,
        handler: &H,
    ) -> impl Future<Output = Result<HeldBatch>> + Send
    where
        H: ReadModelHandler<Model = M>,
    {
        let _ = (projection, batch, handler);
        std::future::ready(Err(unsupported()))
    }

    /// In one transaction: parks the event (unless `projection`'s
    /// checkpoint is already at or past it: `false`) and moves the
    /// checkpoint to its position.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, it is parked and checkpointed, or neither.
    fn park(
        &self,
        projection: &str,
        parking: &Parking,
    ) -> impl Future<Output = Result<bool>> + Send {
        let _ = (projection, parking);
        std::future::ready(Err(unsupported()))
    }

    /// `projection`'s dead letters that `selection` selects, by position.
    /// A read (no DDL: none before the table exists).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn dead_letters(
        &self,
        projection: &str,
        selection: &DeadLetterSelection,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send {
        let _ = (projection, selection);
        std::future::ready(Err(unsupported()))
    }

    /// How many dead letters `projection` has.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn count_dead_letters(&self, projection: &str) -> impl Future<Output = Result<u64>> + Send {
        let _ = projection;
        std::future::ready(Err(unsupported()))
    }

    /// Removes the selected dead letters; returns how many went.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, they went or not.
    fn remove_dead_letters(
        &self,
        projection: &str,
        selection: &DeadLetterSelection,
    ) -> impl Future<Output = Result<u64>> + Send {
        let _ = (projection, selection);
        std::future::ready(Err(unsupported()))
    }

    /// In one transaction: removes the dead letter at `position` and runs
    /// `handler` on its event (`false`, nothing run: there is no such dead
    /// letter, e.g. another replay took it). The checkpoint is not touched.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before the commit, the letter stays and the
    /// event is not applied; after it, both happened.
    fn apply_dead_letter<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> impl Future<Output = Result<bool>> + Send
    where
        H: ReadModelHandler<Model = M>,
    {
        let _ = (projection, position, handler, event);
        std::future::ready(Err(unsupported()))
    }

    /// Records a failed replay of the dead letter at `position`: one more
    /// attempt, `error`, the time, and no replay request any more, neither
    /// on it nor on the other dead letters of its partition (they wait
    /// behind it, so the failure answers their requests too).
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, it was recorded or not.
    fn record_dead_letter_failure(
        &self,
        projection: &str,
        position: i64,
        error: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (projection, position, error);
        std::future::ready(Err(unsupported()))
    }
}
