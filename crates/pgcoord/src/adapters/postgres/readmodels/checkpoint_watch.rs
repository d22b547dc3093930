//! [`PostgresCheckpointWatch`]: follows a projection's committed checkpoint
//! from another process, woken by the notification its runner's batch
//! commits with, for read-your-writes across processes.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, DropGuard};

use super::listen::{spawn_listener, Listener};
use super::pool::PostgresDatabase;
use super::projection::CHECKPOINT_CHANNEL;
use super::PostgresReadModelRepository;
use crate::ports::error::Result;
use crate::ports::readmodels::{
    CheckpointPublisher, FeedSignal, ProjectionProgress, ReadModelMeta, TransactionalReadModels,
};

/// A projection's committed checkpoint, as seen from any process: a
/// `LISTEN` session on the runners' checkpoint channel, and one read of the
/// checkpoint on each notification for this projection (and on every
/// reconnect), never a polling loop. What it publishes is what it read,
/// lower than before too: after a failover to a standby that missed the
/// last commits, the new primary's checkpoint. Cheap to clone; the session
/// ends with the last clone.
///
/// ```no_run
/// # async fn demo(db: pgcoord::readmodels::postgres::PostgresDatabase, written_at: i64) -> pgcoord::Result<()> {
/// use std::time::Duration;
/// use pgcoord::readmodels::postgres::PostgresCheckpointWatch;
///
/// let watch = PostgresCheckpointWatch::start(&db, "order_summaries");
/// // After appending an event at `written_at`: wait until the read model has it.
/// watch.wait_for(written_at, Some(Duration::from_secs(2))).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresCheckpointWatch {
    progress: ProjectionProgress,
    _session: Arc<(Listener, DropGuard)>,
}

impl PostgresCheckpointWatch {
    /// Starts following `projection`'s checkpoint on `db` (the read-model
    /// database its runner writes to). Must be called inside a tokio
    /// runtime.
    pub fn start(db: &PostgresDatabase, projection: &str) -> Self {
        let signal = FeedSignal::new();
        let mut wake = signal.subscribe();
        let name = projection.to_owned();
        let listener = spawn_listener(
            db,
            vec![CHECKPOINT_CHANNEL.to_owned()],
            Box::new(move |_, payload| payload == name),
            signal,
        );
        let publisher = CheckpointPublisher::new();
        let progress = publisher.progress();
        let stop = CancellationToken::new();
        let token = stop.clone();
        // Any model type will do: only the checkpoint statements run.
        let repo = PostgresReadModelRepository::<NoModel, _>::new(db.clone());
        let name = projection.to_owned();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = wake.changed() => {}
                    _ = token.cancelled() => return,
                }
                match repo.checkpoint(&name).await {
                    Ok(c) => publisher.publish_read(c),
                    Err(e) => {
                        tracing::warn!(error = %e, projection = %name, "checkpoint watch: read failed")
                    }
                }
            }
        });
        Self {
            progress,
            _session: Arc::new((listener, stop.drop_guard())),
        }
    }

    /// The last checkpoint read, `None` before the first read (or event).
    pub fn checkpoint(&self) -> Option<i64> {
        self.progress.checkpoint()
    }

    /// See [`ProjectionProgress::wait_for`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wait on a watch.
    pub async fn wait_for(&self, position: i64, timeout: Option<Duration>) -> Result<i64> {
        self.progress.wait_for(position, timeout).await
    }

    /// The view itself, to hand to code that takes a [`ProjectionProgress`].
    pub fn progress(&self) -> ProjectionProgress {
        self.progress.clone()
    }
}

/// A model no table is made for: the checkpoint statements only.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct NoModel {
    #[serde(flatten)]
    meta: ReadModelMeta,
}

impl crate::ports::readmodels::ReadModel for NoModel {
    const TABLE_NAME: Option<&'static str> = Some("eventsource_no_model");
    fn fields() -> Vec<crate::ports::readmodels::FieldDescriptor> {
        Vec::new()
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}
