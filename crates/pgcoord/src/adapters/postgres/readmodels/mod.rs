//! [`PostgresReadModelRepository`]: the read-model port on PostgreSQL, over
//! tokio-postgres.
//!
//! The repository takes its client from a [`PgClientSource`]: the
//! [`PostgresDatabase`] pool, a `tokio::sync::Mutex<Client>`, or a caller's
//! [`tokio_postgres::Transaction`] (then every statement runs inside it and
//! nothing is committed by the repository).

mod checkpoint_watch;
mod codec;
mod dead_letters;
mod event_table;
mod event_table_errors;
mod listen;
mod own_transaction;
mod parking;
mod pool;
mod projection;
mod repository;
mod runner_census;
mod source;
mod status;
mod version_grants;
mod version_names;
mod version_switch;
mod versions;
mod watermark;

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::adapters::sql::{schema, Dialect, SqlTable, Statement};
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};
use crate::ports::readmodels::storage::{now_micros, DeletedRows, Record};
use crate::ports::readmodels::{Query, ReadModel, ReadModelError, ReadModelRepository};

pub use checkpoint_watch::PostgresCheckpointWatch;
use codec::{bind, decode_row, typed_params};
pub use dead_letters::{
    count_dead_letters, drop_dead_letters, list_dead_letters, request_replay, DEAD_LETTER_TABLE,
};
pub use event_table::PostgresEventTable;
pub use pool::{PooledClient, PostgresDatabase, PostgresDatabaseBuilder, DEFAULT_POOL_SIZE};
pub(crate) use source::query_error;
pub use source::{ExclusiveClient, PgClientSource, PgGuard};
pub use status::{projection_status, ProjectionStatus, RebuildProgress, RunnerInfo, STALL_SECONDS};
pub use version_switch::PostgresVersionSwitch;
pub use versions::VERSIONS_TABLE;

/// The most rows one `save_many` statement carries (PostgreSQL accepts at
/// most 65535 parameters per statement).
const MAX_PARAMS: usize = 65_000;

/// A read-model repository on PostgreSQL.
///
/// Every call is one statement, so a repository on a pool needs no
/// transaction of its own, except `save_many` when the batch takes several
/// statements (it names an id twice, or is too large for one): then they
/// run in one transaction on one connection, all or nothing. Inside a
/// caller's transaction everything it does commits or rolls back with that
/// transaction. On the pool, statements are prepared once per connection.
///
/// Text compares and sorts byte-wise (`COLLATE "C"`), whatever the
/// database's collation, so results agree with the other backends.
///
/// ```no_run
/// # async fn demo(client: &mut tokio_postgres::Client) -> pgcoord::Result<()> {
/// # use pgcoord::readmodels::{ReadModel, ReadModelMeta};
/// # #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, ReadModel)]
/// # struct Category { #[serde(flatten)] meta: ReadModelMeta, name: String }
/// use pgcoord::readmodels::postgres::PostgresReadModelRepository;
/// use pgcoord::readmodels::ReadModelRepository;
///
/// // Inside the caller's transaction: the repository never commits.
/// let tx = client.transaction().await.expect("BEGIN");
/// let repo = PostgresReadModelRepository::<Category, _>::new(&tx);
/// repo.save(&Category { meta: ReadModelMeta::new_random(), name: "books".into() }).await?;
/// tx.commit().await.expect("COMMIT");
/// # Ok(()) }
/// ```
pub struct PostgresReadModelRepository<M, S> {
    source: S,
    table: Arc<SqlTable>,
    _model: PhantomData<fn() -> M>,
}

impl<M: ReadModel, S: PgClientSource> PostgresReadModelRepository<M, S> {
    /// A repository taking its clients from `source`.
    pub fn new(source: S) -> Self {
        Self {
            source,
            table: Arc::new(SqlTable::new(
                Dialect::Postgres,
                M::table_name(),
                M::fields(),
            )),
            _model: PhantomData,
        }
    }

    pub(super) fn with_table(source: S, table: Arc<SqlTable>) -> Self {
        Self {
            source,
            table,
            _model: PhantomData,
        }
    }

    /// The client source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Creates the table and its indexes when missing.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the script ran or did not.
    pub async fn create_schema(&self) -> Result<()> {
        let client = self.source.client().await?;
        client
            .batch_execute(&schema::full_schema::<M>(Dialect::Postgres))
            .await
            .map_err(|e| schema::explain_schema_error(&M::table_name(), query_error(e)))
    }

    /// The column names of the table in the current schema (empty when the
    /// table does not exist).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub async fn columns(&self) -> Result<Vec<String>> {
        let client = self.source.client().await?;
        let rows = client
            .query(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1 \
                 ORDER BY ordinal_position",
                &[&self.table.table()],
            )
            .await
            .map_err(query_error)?;
        Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
    }

    /// Adds the columns the model declares that the table lacks (creating
    /// the table when missing), in one script; returns the statements run.
    /// See [`schema::migration`] for what is refused.
    ///
    /// # Cancel safety
    ///
    /// The script is one implicit transaction: dropped, all or none of it
    /// happened.
    pub async fn migrate_schema(&self) -> Result<Vec<String>> {
        let existing = self.columns().await?;
        let statements = if existing.is_empty() {
            vec![schema::full_schema::<M>(Dialect::Postgres)]
        } else {
            schema::generate_migration::<M>(Dialect::Postgres, &existing)?
        };
        let script: String = statements.iter().map(|s| format!("{s};\n")).collect();
        let client = self.source.client().await?;
        client
            .batch_execute(&script)
            .await
            .map_err(|e| schema::explain_schema_error(&M::table_name(), query_error(e)))?;
        Ok(statements)
    }

    /// Runs a statement in one round trip: a prepared statement from the
    /// connection's cache when the source has one, else `query_typed` (the
    /// parameter types are known, so nothing is prepared first).
    async fn rows(&self, sql: &str, stmt: &Statement) -> Result<Vec<Row>> {
        let client = self.source.client().await?;
        let params = bind(stmt);
        if let Some(prepared) = client.prepare_cached(sql).await? {
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            return client.query(&prepared, &refs).await.map_err(query_error);
        }
        client
            .query_typed(sql, &typed_params(&params, stmt))
            .await
            .map_err(query_error)
    }

    async fn records(&self, stmt: &Statement) -> Result<Vec<Record>> {
        let rows = self.rows(&stmt.sql, stmt).await?;
        rows.iter().map(|row| self.decode_row(row)).collect()
    }

    /// The number of rows a one-row write touched (`RETURNING 1`, so that
    /// it too takes one round trip).
    async fn touched(&self, stmt: &Statement) -> Result<u64> {
        let rows = self
            .rows(&format!("{} RETURNING 1", stmt.sql), stmt)
            .await?;
        Ok(rows.len() as u64)
    }

    async fn scalar(&self, stmt: &Statement) -> Result<Option<i64>> {
        let rows = self.rows(&stmt.sql, stmt).await?;
        Ok(match rows.first() {
            Some(r) => Some(
                r.try_get::<_, i64>(0)
                    .or_else(|_| r.try_get::<_, i32>(0).map(i64::from))
                    .map_err(query_error)?,
            ),
            None => None,
        })
    }

    fn decode_row(&self, row: &Row) -> Result<Record> {
        decode_row(&self.table, row)
    }

    fn decode_all(&self, records: Vec<Record>) -> Result<Vec<M>> {
        records
            .into_iter()
            .map(|r| Ok(r.into_model(self.table.fields())?))
            .collect()
    }

    fn first(&self, records: Vec<Record>) -> Result<Option<M>> {
        match records.into_iter().next() {
            Some(r) => Ok(Some(r.into_model(self.table.fields())?)),
            None => Ok(None),
        }
    }

    /// Runs one multi-row upsert per batch; the stored records, in input
    /// order.
    async fn upsert_batches(&self, batches: Vec<Vec<Record>>) -> Result<Vec<Record>> {
        let now = now_micros();
        let mut stored = Vec::with_capacity(batches.iter().map(Vec::len).sum());
        for batch in batches {
            let rows = self.records(&self.table.upsert_many(&batch, now)).await?;
            in_input_order(&batch, rows, &mut stored)?;
        }
        Ok(stored)
    }

    /// Splits a batch into groups that one multi-row upsert can take: no id
    /// twice in a group (PostgreSQL refuses to update a row twice in one
    /// statement), and under the parameter limit.
    fn batches(&self, records: Vec<Record>) -> Vec<Vec<Record>> {
        let per_row = 5 + self.table.fields().len();
        let max_rows = (MAX_PARAMS / per_row).max(1);
        let mut out: Vec<Vec<Record>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for record in records {
            let full = out.last().is_none_or(|b| b.len() >= max_rows);
            if full || !seen.insert(record.meta.id) {
                seen.clear();
                seen.insert(record.meta.id);
                out.push(Vec::new());
            }
            out.last_mut().expect("a batch was pushed").push(record);
        }
        out
    }
}

impl<M, S: Clone> Clone for PostgresReadModelRepository<M, S> {
    fn clone(&self) -> Self {
        Self {
            source: self.source.clone(),
            table: self.table.clone(),
            _model: PhantomData,
        }
    }
}

impl<M, S> fmt::Debug for PostgresReadModelRepository<M, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresReadModelRepository")
            .field("table", &self.table.table())
            .field("source", &std::any::type_name::<S>())
            .finish()
    }
}

fn records_len(batches: &[Vec<Record>]) -> usize {
    batches.iter().map(Vec::len).sum()
}

/// Appends the rows an upsert of `batch` returned to `stored`, in the order
/// of `batch`.
fn in_input_order(batch: &[Record], rows: Vec<Record>, stored: &mut Vec<Record>) -> Result<()> {
    // PostgreSQL returns an upsert's rows in the order of its VALUES list
    // (not a promise, so checked): then no map is needed.
    if rows.len() == batch.len() && rows.iter().zip(batch).all(|(r, b)| r.meta.id == b.meta.id) {
        stored.extend(rows);
        return Ok(());
    }
    let mut by_id: HashMap<Uuid, Record> = rows.into_iter().map(|r| (r.meta.id, r)).collect();
    for record in batch {
        stored.push(
            by_id
                .remove(&record.meta.id)
                .ok_or_else(|| backend("upsert returned too few rows"))?,
        );
    }
    Ok(())
}

fn backend(message: &str) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, message))
}
