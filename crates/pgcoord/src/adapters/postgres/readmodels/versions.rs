//! The PostgreSQL repository as a [`VersionedReadModels`] backend: the
//! versions table `eventsource_projection_versions` (one row per
//! projection: the current version, the one building, the retired ones),
//! the versioned tables `t_vN`, and the switch ([`PostgresVersionSwitch`]).

use std::sync::Arc;

use tokio_postgres::GenericClient;

use super::source::query_error;
use super::version_names::{version_schema, version_table};
use super::version_switch::{delete_checkpoint, read_versions, PostgresVersionSwitch};
use super::{PostgresDatabase, PostgresReadModelRepository};
use crate::adapters::sql::{quote_ident, Dialect, SqlTable};
use crate::ports::error::Result;
use crate::ports::readmodels::{version_name, ProjectionVersions, ReadModel, VersionedReadModels};

/// The versions table.
pub const VERSIONS_TABLE: &str = "eventsource_projection_versions";

const CREATE_VERSIONS: &str = r#"CREATE TABLE IF NOT EXISTS "eventsource_projection_versions" ("projection" TEXT PRIMARY KEY, "current" INTEGER NOT NULL DEFAULT 1, "building" INTEGER, "retired" INTEGER[] NOT NULL DEFAULT '{}', "updated_at" TIMESTAMPTZ NOT NULL DEFAULT now())"#;

/// Creating the versions table is serialised on this transaction-scoped
/// advisory lock (concurrent `CREATE TABLE IF NOT EXISTS` can collide).
const VERSIONS_LOCK: i64 = 0x6576_7476_6572_7331;

const LOCK_ROW: &str = r#"SELECT "current", "building", "retired" FROM "eventsource_projection_versions" WHERE "projection" = $1 FOR UPDATE"#;

/// Opens a transaction with the versions table there and `projection`'s
/// row locked.
async fn lock_row<C: GenericClient + Sync>(c: &C, projection: &str) -> Result<ProjectionVersions> {
    c.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({VERSIONS_LOCK}); {CREATE_VERSIONS}"
    ))
    .await
    .map_err(query_error)?;
    c.execute(
        r#"INSERT INTO "eventsource_projection_versions" ("projection") VALUES ($1) ON CONFLICT DO NOTHING"#,
        &[&projection],
    )
    .await
    .map_err(query_error)?;
    read_versions(c, LOCK_ROW, projection).await
}

/// 42P01: the table does not exist (yet).
fn is_undefined_table(e: &crate::Error) -> bool {
    matches!(e, crate::Error::Backend(b) if b.code() == Some(&crate::ports::sql_state::SqlState::UNDEFINED_TABLE))
}

impl<M: ReadModel> VersionedReadModels<M> for PostgresReadModelRepository<M, PostgresDatabase> {
    type Switch = PostgresVersionSwitch;

    async fn versions(&self, projection: &str) -> Result<ProjectionVersions> {
        let client = self.source.get().await?;
        let sql = LOCK_ROW.trim_end_matches(" FOR UPDATE");
        match read_versions(&*client, sql, projection).await {
            Err(e) if is_undefined_table(&e) => read_versions_default(),
            other => other,
        }
    }

    async fn start_version(&self, projection: &str) -> Result<u32> {
        let mut client = self.source.get().await?;
        let tx = client.transaction().await.map_err(query_error)?;
        let versions = lock_row(&tx, projection).await?;
        let version = match versions.building {
            Some(v) => v,
            None => {
                let next = versions
                    .retired
                    .iter()
                    .copied()
                    .fold(versions.current, u32::max)
                    + 1;
                tx.execute(
                    r#"UPDATE "eventsource_projection_versions" SET "building" = $2, "updated_at" = now() WHERE "projection" = $1"#,
                    &[&projection as &(dyn tokio_postgres::types::ToSql + Sync), &(next as i32)],
                )
                .await
                .map_err(query_error)?;
                next
            }
        };
        let script = version_schema(self.table.table(), version, &M::fields(), &M::indexes())?;
        tx.batch_execute(&script).await.map_err(query_error)?;
        tx.commit().await.map_err(query_error)?;
        Ok(version)
    }

    fn at_version(&self, version: u32) -> Result<Self> {
        let table = version_table(self.table.table(), version)?;
        Ok(Self::with_table(
            self.source.clone(),
            Arc::new(SqlTable::new(Dialect::Postgres, table, M::fields())),
        ))
    }

    async fn abandon_version(&self, projection: &str) -> Result<Option<u32>> {
        crate::ports::readmodels::TransactionalReadModels::<M>::prepare_checkpoints(self).await?;
        let mut client = self.source.get().await?;
        let tx = client.transaction().await.map_err(query_error)?;
        let Some(version) = lock_row(&tx, projection).await?.building else {
            return Ok(None); // rolls back
        };
        let table = version_table(self.table.table(), version)?;
        tx.batch_execute(&format!("DROP TABLE IF EXISTS {}", quote_ident(&table)))
            .await
            .map_err(query_error)?;
        tx.execute(
            r#"UPDATE "eventsource_projection_versions" SET "building" = NULL, "updated_at" = now() WHERE "projection" = $1"#,
            &[&projection],
        )
        .await
        .map_err(query_error)?;
        delete_checkpoint(&tx, &version_name(projection, version)).await?;
        tx.commit().await.map_err(query_error)?;
        Ok(Some(version))
    }

    async fn begin_switch(&self, projection: &str, version: u32) -> Result<PostgresVersionSwitch> {
        PostgresVersionSwitch::begin(
            self.source.get().await?,
            self.table.table(),
            &M::indexes(),
            projection,
            version,
        )
        .await
    }

    async fn drop_retired(&self, projection: &str) -> Result<Vec<u32>> {
        let mut client = self.source.get().await?;
        let tx = client.transaction().await.map_err(query_error)?;
        let retired = lock_row(&tx, projection).await?.retired;
        for version in &retired {
            let table = version_table(self.table.table(), *version)?;
            tx.batch_execute(&format!("DROP TABLE IF EXISTS {}", quote_ident(&table)))
                .await
                .map_err(query_error)?;
        }
        tx.execute(
            r#"UPDATE "eventsource_projection_versions" SET "retired" = '{}', "updated_at" = now() WHERE "projection" = $1"#,
            &[&projection],
        )
        .await
        .map_err(query_error)?;
        tx.commit().await.map_err(query_error)?;
        Ok(retired)
    }
}

fn read_versions_default() -> Result<ProjectionVersions> {
    Ok(ProjectionVersions {
        current: 1,
        ..ProjectionVersions::default()
    })
}
