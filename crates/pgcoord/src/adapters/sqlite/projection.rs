//! The SQLite repository as a projection backend: one `BEGIN IMMEDIATE`
//! transaction per event, with the projection's checkpoint in it.

use rusqlite::{Connection, OptionalExtension};

use super::error::sqlite_error;
use super::readmodels::SqliteReadModelRepository;
use super::worker::in_one_go;
use crate::adapters::sql::{CheckpointSql, Dialect};
use crate::ports::error::Result;
use crate::ports::readmodels::{
    Applied, ReadModel, ReadModelHandler, ReadModelRepository, TransactionalReadModels,
};

const SQL: &CheckpointSql = CheckpointSql::for_dialect_const(Dialect::Sqlite);

fn read_checkpoint(c: &Connection, projection: &str) -> Result<Option<i64>> {
    c.prepare_cached(SQL.read)
        .and_then(|mut s| s.query_row([projection], |r| r.get::<_, i64>(0)).optional())
        .map_err(sqlite_error)
}

fn advance(c: &Connection, projection: &str, position: i64) -> Result<bool> {
    let mut stmt = c.prepare_cached(SQL.advance).map_err(sqlite_error)?;
    let mut rows = stmt
        .query(rusqlite::params![projection, position])
        .map_err(sqlite_error)?;
    Ok(rows.next().map_err(sqlite_error)?.is_some())
}

impl<M: ReadModel> SqliteReadModelRepository<M> {
    async fn read_checkpoint(&self, projection: &str) -> Result<Option<i64>> {
        let name = projection.to_owned();
        self.with(move |c, _| read_checkpoint(c, &name)).await
    }

    async fn advance(&self, projection: &str, position: i64) -> Result<bool> {
        let name = projection.to_owned();
        self.with(move |c, _| advance(c, &name, position)).await
    }
}

impl<M: ReadModel> TransactionalReadModels<M> for SqliteReadModelRepository<M> {
    /// Runs the handler inside a `BEGIN IMMEDIATE` transaction on this
    /// repository's database. A repository already bound to a transaction
    /// runs the handler inside that one (the caller commits).
    async fn apply<H>(&self, handler: &H, event: &H::Event) -> Result<()>
    where
        H: ReadModelHandler<Model = M>,
    {
        if self.in_transaction() {
            return handler.handle(event, self).await;
        }
        in_one_go(async {
            let tx = self.database().transaction().await?;
            let repo = self.bound_to(&tx);
            match handler.handle(event, &repo).await {
                Ok(()) => tx.commit().await,
                Err(e) => {
                    tx.rollback().await?;
                    Err(e)
                }
            }
        })
        .await
    }

    async fn truncate_all(&self) -> Result<u64> {
        self.truncate().await
    }

    async fn prepare_checkpoints(&self) -> Result<()> {
        self.with(|c, _| c.execute_batch(SQL.create).map_err(sqlite_error))
            .await
    }

    /// `None` also when the checkpoint table does not exist yet (a read
    /// never creates it).
    async fn checkpoint(&self, projection: &str) -> Result<Option<i64>> {
        match self.read_checkpoint(projection).await {
            Err(crate::Error::Backend(b)) if b.message().starts_with("no such table") => Ok(None),
            other => other,
        }
    }

    async fn checkpoint_names(&self, prefix: &str) -> Result<Vec<String>> {
        let prefix = prefix.to_owned();
        let read = self
            .with(move |c, _| {
                let mut stmt = c
                    .prepare_cached(r#"SELECT "projection" FROM "eventsource_projection_checkpoints" WHERE substr("projection", 1, length(?1)) = ?1 ORDER BY 1"#)
                    .map_err(sqlite_error)?;
                let rows = stmt
                    .query_map([&prefix], |r| r.get::<_, String>(0))
                    .map_err(sqlite_error)?;
                rows.collect::<rusqlite::Result<Vec<String>>>().map_err(sqlite_error)
            })
            .await;
        match read {
            Err(crate::Error::Backend(b)) if b.message().starts_with("no such table") => {
                Ok(Vec::new())
            }
            other => other,
        }
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
        if self.in_transaction() {
            if self
                .read_checkpoint(projection)
                .await?
                .is_some_and(|c| position <= c)
            {
                return Ok(Applied::Skipped);
            }
            handler.handle(event, self).await?;
            self.advance(projection, position).await?;
            return Ok(Applied::Applied);
        }
        in_one_go(self.apply_at_in_own_transaction(projection, position, handler, event)).await
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
        if self.in_transaction() {
            let mut applied = 0;
            for (position, event) in events {
                if self.apply_at(projection, *position, handler, event).await? == Applied::Applied {
                    applied += 1;
                }
            }
            return Ok(applied);
        }
        in_one_go(self.apply_batch_in_own_transaction(projection, events, handler)).await
    }

    async fn reset(&self, projection: &str) -> Result<u64> {
        let name = projection.to_owned();
        let run = move |c: &Connection, table: &str| -> Result<u64> {
            let n = c.execute(table, []).map_err(sqlite_error)?;
            c.execute(SQL.delete, [&name]).map_err(sqlite_error)?;
            Ok(n as u64)
        };
        if self.in_transaction() {
            return self.with(move |c, t| run(c, &t.truncate().sql)).await;
        }
        let tx = self.database().transaction().await?;
        let n = tx
            .repository::<M>()
            .with(move |c, t| run(c, &t.truncate().sql))
            .await?;
        tx.commit().await?;
        Ok(n)
    }
}

impl<M: ReadModel> SqliteReadModelRepository<M> {
    async fn apply_at_in_own_transaction<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<Applied>
    where
        H: ReadModelHandler<Model = M>,
    {
        // Dropped or failed before the commit, the transaction rolls back.
        let tx = self.database().transaction().await?;
        let repo = self.bound_to(&tx);
        if repo
            .read_checkpoint(projection)
            .await?
            .is_some_and(|c| position <= c)
        {
            tx.rollback().await?;
            return Ok(Applied::Skipped);
        }
        if let Err(e) = handler.handle(event, &repo).await {
            tx.rollback().await?;
            return Err(e);
        }
        if !repo.advance(projection, position).await? {
            tx.rollback().await?;
            return Ok(Applied::Skipped);
        }
        tx.commit().await?;
        Ok(Applied::Applied)
    }

    async fn apply_batch_in_own_transaction<H>(
        &self,
        projection: &str,
        events: &[(i64, &H::Event)],
        handler: &H,
    ) -> Result<u64>
    where
        H: ReadModelHandler<Model = M>,
    {
        let tx = self.database().transaction().await?;
        let repo = self.bound_to(&tx);
        let mut checkpoint = repo.read_checkpoint(projection).await?;
        let mut applied = 0;
        for (position, event) in events {
            if checkpoint.is_some_and(|c| *position <= c) {
                continue;
            }
            if let Err(e) = handler.handle(event, &repo).await {
                tx.rollback().await?;
                return Err(e);
            }
            checkpoint = Some(*position);
            applied += 1;
        }
        if let (Some(last), true) = (checkpoint, applied > 0) {
            if !repo.advance(projection, last).await? {
                tx.rollback().await?;
                return Ok(0);
            }
        }
        tx.commit().await?;
        Ok(applied)
    }
}
