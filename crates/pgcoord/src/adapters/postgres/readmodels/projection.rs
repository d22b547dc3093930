//! The PostgreSQL repository as a projection backend: one transaction per
//! event, with the projection's checkpoint in the same transaction.

use tokio_postgres::types::Type;
use tokio_postgres::GenericClient;

use super::dead_letters;
use super::own_transaction::OwnTransaction;
use super::source::{query_error, PgClientSource};
use super::PostgresReadModelRepository;
use crate::adapters::sql::{CheckpointSql, Dialect, CHECKPOINT_TABLE};
use crate::ports::error::Result;
use crate::ports::readmodels::{
    Applied, DeadLetter, DeadLetterSelection, HeldBatch, HoldingBatch, Parking, ReadModel,
    ReadModelHandler, ReadModelRepository, TransactionalReadModels,
};

const SQL: &CheckpointSql = CheckpointSql::for_dialect_const(Dialect::Postgres);

/// The channel on which a batch's checkpoint advance is announced (payload:
/// the projection's name), delivered when the batch commits.
pub(crate) const CHECKPOINT_CHANNEL: &str = "eventsource_checkpoints";

/// Checkpoint samples for the events/s of a status report: twelve slots of
/// five seconds per projection, overwritten in turn (so a role with only
/// INSERT and UPDATE keeps it; nothing is ever deleted).
pub(crate) const PROGRESS_TABLE: &str = "eventsource_projection_progress";

const CREATE_PROGRESS: &str = r#"CREATE TABLE IF NOT EXISTS "eventsource_projection_progress" ("projection" TEXT NOT NULL, "slot" INTEGER NOT NULL, "at" TIMESTAMPTZ NOT NULL, "position" BIGINT NOT NULL, PRIMARY KEY ("projection", "slot"))"#;

const RECORD_PROGRESS: &str = r#"INSERT INTO "eventsource_projection_progress" AS p ("projection", "slot", "at", "position") VALUES ($1, (floor(extract(epoch FROM now()) / 5)::bigint % 12)::int, now(), $2) ON CONFLICT ("projection", "slot") DO UPDATE SET "at" = EXCLUDED."at", "position" = EXCLUDED."position""#;

/// [`SQL.advance`](CheckpointSql::advance) that also notifies
/// [`CHECKPOINT_CHANNEL`] when it moves the checkpoint.
const ADVANCE_NOTIFY: &str = r#"WITH a AS (INSERT INTO "eventsource_projection_checkpoints" AS c ("projection", "position", "updated_at") VALUES ($1, $2, now()) ON CONFLICT ("projection") DO UPDATE SET "position" = EXCLUDED."position", "updated_at" = EXCLUDED."updated_at" WHERE c."position" < EXCLUDED."position" RETURNING 1) SELECT 1, pg_notify('eventsource_checkpoints', $1) FROM a"#;

/// The transaction-scoped advisory lock id the creation of the tables is
/// serialised on (`lock_id_for_key("eventsource:prepare-checkpoints")`
/// would do as well; a constant keeps the script static).
const PREPARE_LOCK: i64 = 0x6576_7473_6370_7265;

/// True when the tables a projection needs besides its model's are there.
async fn has_tables<C: GenericClient + Sync>(c: &C) -> Result<bool> {
    let row = c
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL",
            &[&CHECKPOINT_TABLE, &PROGRESS_TABLE],
        )
        .await
        .map_err(query_error)?;
    Ok(row.get(0))
}

/// 42P01: the checkpoint table does not exist (yet).
fn is_undefined_table(e: &crate::Error) -> bool {
    matches!(e, crate::Error::Backend(b) if b.code() == Some(&crate::ports::sql_state::SqlState::UNDEFINED_TABLE))
}

// The checkpoint statements go with their parameter types
// (`query_typed`): one round trip each, where a statement sent as text
// would first be prepared in a round trip of its own.

pub(super) async fn read_checkpoint<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
) -> Result<Option<i64>> {
    let row = c
        .query_typed_opt(SQL.read, &[(&projection, Type::TEXT)])
        .await
        .map_err(query_error)?;
    Ok(row.map(|r| r.get::<_, i64>(0)))
}

/// Moves the checkpoint to `position` with [`ADVANCE_NOTIFY`]; false when
/// it already was there or beyond (another runner got there first).
pub(super) async fn advance_notify<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    position: i64,
) -> Result<bool> {
    let moved = c
        .query_typed(
            ADVANCE_NOTIFY,
            &[(&projection, Type::TEXT), (&position, Type::INT8)],
        )
        .await
        .map_err(query_error)?;
    Ok(!moved.is_empty())
}

/// [`read_checkpoint`] inside a transaction of the repository's own: a
/// prepared statement from the connection's cache.
pub(super) async fn read_checkpoint_in(
    tx: &OwnTransaction<'_>,
    projection: &str,
) -> Result<Option<i64>> {
    let rows = tx.query(SQL.read, &[(&projection, Type::TEXT)]).await?;
    Ok(rows.first().map(|r| r.get::<_, i64>(0)))
}

/// [`advance_notify`] inside a transaction of the repository's own.
pub(super) async fn advance_in(
    tx: &OwnTransaction<'_>,
    projection: &str,
    position: i64,
) -> Result<bool> {
    let rows = tx
        .query(
            ADVANCE_NOTIFY,
            &[(&projection, Type::TEXT), (&position, Type::INT8)],
        )
        .await?;
    Ok(!rows.is_empty())
}

impl<M: ReadModel, S: PgClientSource> TransactionalReadModels<M>
    for PostgresReadModelRepository<M, S>
{
    /// Takes a client exclusively, opens a transaction on it, runs the
    /// handler with a repository bound to that transaction, and commits
    /// (or rolls back on error). Inside a caller's transaction the handler
    /// runs in that one (the caller commits).
    async fn apply<H>(&self, handler: &H, event: &H::Event) -> Result<()>
    where
        H: ReadModelHandler<Model = M>,
    {
        let Some(mut client) = self.source.exclusive().await? else {
            return handler.handle(event, self).await;
        };
        let tx = OwnTransaction::begin(&mut client).await?;
        let outcome = {
            let repo = PostgresReadModelRepository::<M, _>::with_table(&tx, self.table.clone());
            handler.handle(event, &repo).await
        };
        match outcome {
            Ok(()) => tx.commit().await,
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    }

    async fn truncate_all(&self) -> Result<u64> {
        self.truncate().await
    }

    /// Creates the checkpoint and progress tables when either is missing;
    /// when both exist, sends no DDL (a role without CREATE works).
    async fn prepare_checkpoints(&self) -> Result<()> {
        let client = self.source.client().await?;
        if has_tables(&*client).await? {
            return Ok(());
        }
        // Runners starting together would race in CREATE TABLE IF NOT
        // EXISTS (a duplicate pg_type row): one at a time.
        client
            .batch_execute(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({PREPARE_LOCK}); {};\n{CREATE_PROGRESS}; COMMIT;",
                SQL.create
            ))
            .await
            .map_err(query_error)
    }

    async fn checkpoint(&self, projection: &str) -> Result<Option<i64>> {
        let client = self.source.client().await?;
        let row = client
            .query_opt(
                r#"SELECT "position" FROM "eventsource_projection_checkpoints" WHERE "projection" = $1"#,
                &[&projection],
            )
            .await
            .map_err(query_error);
        match row {
            Ok(row) => Ok(row.map(|r| r.get::<_, i64>(0))),
            Err(e) if is_undefined_table(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn checkpoint_names(&self, prefix: &str) -> Result<Vec<String>> {
        let client = self.source.client().await?;
        let rows = client
            .query(
                r#"SELECT "projection" FROM "eventsource_projection_checkpoints" WHERE left("projection", length($1)) = $1 ORDER BY 1"#,
                &[&prefix],
            )
            .await
            .map_err(query_error);
        match rows {
            Ok(rows) => Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect()),
            Err(e) if is_undefined_table(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    async fn record_progress(&self, projection: &str, position: i64) -> Result<()> {
        let client = self.source.client().await?;
        client
            .execute(RECORD_PROGRESS, &[&projection, &position])
            .await
            .map_err(query_error)?;
        Ok(())
    }

    async fn apply_at<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<Applied>
    where
        H: ReadModelHandler<Model = M>,
    {
        let Some(mut client) = self.source.exclusive().await? else {
            // Inside the caller's transaction: the caller commits.
            let guard = self.source.client().await?;
            if read_checkpoint(&*guard, projection)
                .await?
                .is_some_and(|c| position <= c)
            {
                return Ok(Applied::Skipped);
            }
            drop(guard);
            handler.handle(event, self).await?;
            let guard = self.source.client().await?;
            advance_notify(&*guard, projection, position).await?;
            return Ok(Applied::Applied);
        };
        let tx = OwnTransaction::begin(&mut client).await?;
        if read_checkpoint_in(&tx, projection)
            .await?
            .is_some_and(|c| position <= c)
        {
            return Ok(Applied::Skipped); // the transaction rolls back on drop
        }
        {
            let repo = PostgresReadModelRepository::<M, _>::with_table(&tx, self.table.clone());
            handler.handle(event, &repo).await?;
        }
        if !advance_in(&tx, projection, position).await? {
            return Ok(Applied::Skipped);
        }
        tx.commit().await?;
        Ok(Applied::Applied)
    }

    async fn apply_batch_at<H>(
        &self,
        projection: &str,
        events: &[(i64, &H::Event)],
        handler: &H,
    ) -> Result<u64>
    where
        H: ReadModelHandler<Model = M>,
    {
        let Some(mut client) = self.source.exclusive().await? else {
            let mut applied = 0;
            for (position, event) in events {
                if self.apply_at(projection, *position, handler, event).await? == Applied::Applied {
                    applied += 1;
                }
            }
            return Ok(applied);
        };
        let tx = OwnTransaction::begin(&mut client).await?;
        let mut checkpoint = read_checkpoint_in(&tx, projection).await?;
        let mut applied = 0;
        {
            let repo = PostgresReadModelRepository::<M, _>::with_table(&tx, self.table.clone());
            for (position, event) in events {
                if checkpoint.is_some_and(|c| *position <= c) {
                    continue;
                }
                handler.handle(event, &repo).await?;
                checkpoint = Some(*position);
                applied += 1;
            }
        }
        if let (Some(last), true) = (checkpoint, applied > 0) {
            if !advance_in(&tx, projection, last).await? {
                return Ok(0); // another runner got there first: roll back
            }
        }
        tx.commit().await?;
        Ok(applied)
    }

    async fn reset(&self, projection: &str) -> Result<u64> {
        let Some(mut client) = self.source.exclusive().await? else {
            let n = self.truncate().await?;
            let guard = self.source.client().await?;
            guard
                .execute(SQL.delete, &[&projection])
                .await
                .map_err(query_error)?;
            return Ok(n);
        };
        let tx = client.transaction().await.map_err(query_error)?;
        let n = tx
            .execute(&*self.table.truncate().sql, &[])
            .await
            .map_err(query_error)?;
        tx.execute(SQL.delete, &[&projection])
            .await
            .map_err(query_error)?;
        tx.commit().await.map_err(query_error)?;
        Ok(n)
    }

    async fn prepare_dead_letters(&self) -> Result<()> {
        self.prepare_dead_letter_table().await
    }

    async fn apply_batch_holding<H>(
        &self,
        projection: &str,
        batch: &HoldingBatch<'_, H::Event>,
        handler: &H,
    ) -> Result<HeldBatch>
    where
        H: ReadModelHandler<Model = M>,
    {
        self.hold_batch(projection, batch, handler).await
    }

    async fn park(&self, projection: &str, parking: &Parking) -> Result<bool> {
        self.park_event(projection, parking).await
    }

    async fn dead_letters(
        &self,
        projection: &str,
        selection: &DeadLetterSelection,
    ) -> Result<Vec<DeadLetter>> {
        let client = self.source.client().await?;
        dead_letters::list_dead_letters(&*client, projection, selection).await
    }

    async fn count_dead_letters(&self, projection: &str) -> Result<u64> {
        let client = self.source.client().await?;
        dead_letters::count_dead_letters(&*client, projection).await
    }

    async fn remove_dead_letters(
        &self,
        projection: &str,
        selection: &DeadLetterSelection,
    ) -> Result<u64> {
        let client = self.source.client().await?;
        dead_letters::drop_dead_letters(&*client, projection, selection).await
    }

    async fn apply_dead_letter<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<bool>
    where
        H: ReadModelHandler<Model = M>,
    {
        self.replay_one(projection, position, handler, event).await
    }

    async fn record_dead_letter_failure(
        &self,
        projection: &str,
        position: i64,
        error: &str,
    ) -> Result<()> {
        let client = self.source.client().await?;
        dead_letters::record_failure(&*client, projection, position, error).await
    }
}
