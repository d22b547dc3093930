//! [`PostgresVersionSwitch`]: the one transaction that makes a rebuilt
//! version the one readers see.

use std::fmt;

use tokio_postgres::GenericClient;

use super::dead_letters::DEAD_LETTER_TABLE;
use super::pool::PooledClient;
use super::source::query_error;
use super::version_grants::copied_grants;
use super::version_names::{index_names, rename_index, version_table, IndexNames};
use crate::adapters::sql::quote_ident;
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{version_name, IndexDescriptor, ProjectionVersions, VersionSwitch};

/// An open switch to a new version of a projection's table: a transaction
/// on a connection of its own holding the live checkpoint's row lock (the
/// live runner's next batch waits on it) and the versions row.
///
/// Dropped before [`commit`](VersionSwitch::commit), its connection is
/// closed rather than put back in the pool, so the server rolls the
/// transaction back and the live runner goes on.
pub struct PostgresVersionSwitch {
    client: Option<PooledClient>,
    table: String,
    indexes: Vec<IndexNames>,
    projection: String,
    version: u32,
    current: u32,
    live_checkpoint: Option<i64>,
}

impl PostgresVersionSwitch {
    pub(super) async fn begin(
        client: PooledClient,
        table: &str,
        indexes: &[IndexDescriptor],
        projection: &str,
        version: u32,
    ) -> Result<Self> {
        let mut switch = Self {
            client: Some(client),
            table: table.to_owned(),
            indexes: Vec::new(),
            projection: projection.to_owned(),
            version,
            current: 0,
            live_checkpoint: None,
        };
        let c = switch.client.as_ref().expect("just set");
        // A row to lock even before the live runner's first batch (0 is
        // below every position, so it reads as "nothing applied").
        c.execute(
            r#"INSERT INTO "eventsource_projection_checkpoints" ("projection", "position") VALUES ($1, 0) ON CONFLICT DO NOTHING"#,
            &[&projection],
        )
        .await
        .map_err(query_error)?;
        c.batch_execute("BEGIN").await.map_err(query_error)?;
        if let Some(bound) = crate::ports::readmodels::batch_idle_bound() {
            // A frozen rebuild must not hold the live checkpoint for ever.
            let set = crate::ports::readmodels::set_local_idle_timeout(bound);
            c.batch_execute(&set).await.map_err(query_error)?;
        }
        let versions = read_versions(
            &**c,
            r#"SELECT "current", "building", "retired" FROM "eventsource_projection_versions" WHERE "projection" = $1 FOR UPDATE"#,
            projection,
        )
        .await?;
        if versions.building != Some(version) {
            return Err(Error::InvalidArgument(format!(
                "projection {projection:?} is not building version {version} (building: {:?})",
                versions.building
            )));
        }
        let row = c
            .query_one(
                r#"SELECT "position" FROM "eventsource_projection_checkpoints" WHERE "projection" = $1 FOR UPDATE"#,
                &[&projection],
            )
            .await
            .map_err(query_error)?;
        let position: i64 = row.get(0);
        switch.live_checkpoint = (position > 0).then_some(position);
        switch.current = versions.current;
        switch.indexes = index_names(table, indexes, version, versions.current)?;
        Ok(switch)
    }

    fn script(&self) -> Result<String> {
        let live = quote_ident(&self.table);
        let retired = version_table(&self.table, self.current)?;
        let building = version_table(&self.table, self.version)?;
        let mut sql = vec![format!(
            "ALTER TABLE IF EXISTS {live} RENAME TO {}",
            quote_ident(&retired)
        )];
        sql.extend(
            self.indexes
                .iter()
                .map(|n| rename_index(&n.live, &n.retired)),
        );
        sql.push(format!(
            "ALTER TABLE {} RENAME TO {live}",
            quote_ident(&building)
        ));
        sql.extend(
            self.indexes
                .iter()
                .map(|n| rename_index(&n.building, &n.live)),
        );
        Ok(sql.iter().map(|s| format!("{s};\n")).collect())
    }
}

impl VersionSwitch for PostgresVersionSwitch {
    fn live_checkpoint(&self) -> Option<i64> {
        self.live_checkpoint
    }

    async fn commit(mut self, checkpoint: Option<i64>) -> Result<()> {
        let c = self.client.as_ref().expect("open until commit");
        // The new version takes over the live table's grants (readers'
        // SELECT, a live runner role's DML), before the renames.
        let building = version_table(&self.table, self.version)?;
        let grants = copied_grants(&**c, &self.table, &building).await?;
        let script = self.script()?;
        let position = checkpoint.max(self.live_checkpoint).unwrap_or(0);
        c.batch_execute(&format!("{grants}{script}"))
            .await
            .map_err(query_error)?;
        c.execute(
            r#"UPDATE "eventsource_projection_checkpoints" SET "position" = $2, "updated_at" = now() WHERE "projection" = $1"#,
            &[&self.projection, &position],
        )
        .await
        .map_err(query_error)?;
        delete_checkpoint(&**c, &version_name(&self.projection, self.version)).await?;
        unpark_applied(&**c, &self.projection, position).await?;
        c.execute(
            r#"UPDATE "eventsource_projection_versions" SET "current" = "building", "building" = NULL, "retired" = array_append("retired", "current"), "updated_at" = now() WHERE "projection" = $1"#,
            &[&self.projection],
        )
        .await
        .map_err(query_error)?;
        c.execute(
            "SELECT pg_notify('eventsource_checkpoints', $1)",
            &[&self.projection],
        )
        .await
        .map_err(query_error)?;
        c.batch_execute("COMMIT").await.map_err(query_error)?;
        self.client.take(); // committed: back to the pool
        Ok(())
    }
}

impl Drop for PostgresVersionSwitch {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            client.discard(); // the server rolls the transaction back
        }
    }
}

impl fmt::Debug for PostgresVersionSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresVersionSwitch")
            .field("projection", &self.projection)
            .field("version", &self.version)
            .field("live_checkpoint", &self.live_checkpoint)
            .field("open", &self.client.is_some())
            .finish()
    }
}

/// The row of `projection` read with `sql` (`LOCK_ROW`, or the same
/// without `FOR UPDATE`).
pub(super) async fn read_versions<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    projection: &str,
) -> Result<ProjectionVersions> {
    let row = c
        .query_opt(sql, &[&projection])
        .await
        .map_err(query_error)?;
    Ok(match row {
        None => ProjectionVersions {
            current: 1,
            building: None,
            retired: Vec::new(),
        },
        Some(r) => ProjectionVersions {
            current: r.get::<_, i32>(0) as u32,
            building: r.get::<_, Option<i32>>(1).map(|v| v as u32),
            retired: r
                .get::<_, Vec<i32>>(2)
                .into_iter()
                .map(|v| v as u32)
                .collect(),
        },
    })
}

/// Removes the checkpoint row `name`.
pub(super) async fn delete_checkpoint<C: GenericClient + Sync>(c: &C, name: &str) -> Result<()> {
    c.execute(
        r#"DELETE FROM "eventsource_projection_checkpoints" WHERE "projection" = $1"#,
        &[&name],
    )
    .await
    .map_err(query_error)?;
    Ok(())
}

/// Removes `projection`'s parked events up to `position`: the new version
/// applied every one of them through its own handler (a rebuild parks
/// nothing), so replaying them would apply them twice.
async fn unpark_applied<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    position: i64,
) -> Result<()> {
    let exists: bool = c
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&DEAD_LETTER_TABLE])
        .await
        .map_err(query_error)?
        .get(0);
    if exists {
        c.execute(
            &format!(
                r#"DELETE FROM "{DEAD_LETTER_TABLE}" WHERE "projection" = $1 AND "position" <= $2"#
            ),
            &[&projection, &position],
        )
        .await
        .map_err(query_error)?;
    }
    Ok(())
}
