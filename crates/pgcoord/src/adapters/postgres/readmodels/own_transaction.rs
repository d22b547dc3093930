//! [`OwnTransaction`]: a transaction the repository opened itself on a
//! client it was lent exclusively (a projection's batch, `apply`), as a
//! [`PgClientSource`] that keeps the connection's prepared statements.
//!
//! Statements inside it go as prepared statements from the pooled
//! connection's cache (one round trip, parsed and planned once per
//! connection), where a bare [`Transaction`] has no cache and each would be
//! sent with `query_typed` (parsed and planned by the server every time).
//! Prepared statements are not transactional in PostgreSQL: one prepared
//! inside a transaction that then rolls back stays valid.

use std::ops::Deref;
use std::sync::Arc;

use deadpool_postgres::StatementCache;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, Statement, Transaction};

use super::source::{query_error, ExclusiveClient, PgClientSource, PgGuard};
use crate::ports::error::Result;

/// A transaction of the repository's own, with the statement cache of the
/// connection it runs on (when that connection has one).
pub(super) struct OwnTransaction<'t> {
    tx: Transaction<'t>,
    cache: Option<Arc<StatementCache>>,
}

impl<'t> OwnTransaction<'t> {
    /// Begins a transaction on `client`, bounded by the task's
    /// [batch idle bound](crate::ports::readmodels::batch_idle_bound) when
    /// it has one.
    pub(super) async fn begin(client: &'t mut ExclusiveClient<'_>) -> Result<Self> {
        let cache = client.statement_cache();
        let tx = client.transaction().await.map_err(query_error)?;
        if let Some(bound) = crate::ports::readmodels::batch_idle_bound() {
            // A runner's batch: the server ends it if it sits idle longer
            // (a frozen runner would hold back every feed and its rows).
            let set = crate::ports::readmodels::set_local_idle_timeout(bound);
            tx.batch_execute(&set).await.map_err(query_error)?;
        }
        Ok(Self { tx, cache })
    }

    /// Commits.
    pub(super) async fn commit(self) -> Result<()> {
        self.tx.commit().await.map_err(query_error)
    }

    /// Rolls back.
    pub(super) async fn rollback(self) -> Result<()> {
        self.tx.rollback().await.map_err(query_error)
    }

    /// Runs `sql` as a prepared statement from the cache, or with its
    /// parameter types when there is no cache.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>> {
        match prepared(&self.cache, &self.tx, sql).await? {
            Some(stmt) => {
                let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
                self.tx.query(&stmt, &values).await.map_err(query_error)
            }
            None => self.tx.query_typed(sql, params).await.map_err(query_error),
        }
    }
}

impl<'t> Deref for OwnTransaction<'t> {
    type Target = Transaction<'t>;

    fn deref(&self) -> &Transaction<'t> {
        &self.tx
    }
}

async fn prepared(
    cache: &Option<Arc<StatementCache>>,
    tx: &Transaction<'_>,
    sql: &str,
) -> Result<Option<Statement>> {
    match cache {
        Some(cache) => cache
            .prepare(tx.client(), sql)
            .await
            .map(Some)
            .map_err(query_error),
        None => Ok(None),
    }
}

/// What an [`OwnTransaction`] lends: the transaction and its cache.
pub(super) struct OwnGuard<'a, 't>(&'a OwnTransaction<'t>);

impl<'t> Deref for OwnGuard<'_, 't> {
    type Target = Transaction<'t>;

    fn deref(&self) -> &Transaction<'t> {
        &self.0.tx
    }
}

impl PgGuard for OwnGuard<'_, '_> {
    async fn prepare_cached(&self, sql: &str) -> Result<Option<Statement>> {
        prepared(&self.0.cache, &self.0.tx, sql).await
    }
}

impl<'t> PgClientSource for OwnTransaction<'t> {
    type Client = Transaction<'t>;
    type Guard<'a>
        = OwnGuard<'a, 't>
    where
        Self: 'a;

    async fn client(&self) -> Result<OwnGuard<'_, 't>> {
        Ok(OwnGuard(self))
    }

    async fn exclusive(&self) -> Result<Option<ExclusiveClient<'_>>> {
        Ok(None)
    }

    fn in_caller_transaction(&self) -> bool {
        true
    }
}
