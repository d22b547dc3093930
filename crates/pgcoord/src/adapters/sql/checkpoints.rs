//! The statements of the projection checkpoint table, one row per
//! projection name: `eventsource_projection_checkpoints (projection,
//! position, updated_at)`.

use super::Dialect;

/// The checkpoint table's name.
pub const CHECKPOINT_TABLE: &str = "eventsource_projection_checkpoints";

/// The checkpoint statements of one dialect. Parameters: the projection
/// name first, then the position.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointSql {
    /// `CREATE TABLE IF NOT EXISTS ...`.
    pub create: &'static str,
    /// The position of `$1`, locking the row on PostgreSQL (SQLite's
    /// `BEGIN IMMEDIATE` already holds the write lock).
    pub read: &'static str,
    /// Sets `$1`'s position to `$2` when that moves it forward; returns a
    /// row only then.
    pub advance: &'static str,
    /// Removes `$1`'s row.
    pub delete: &'static str,
}

const POSTGRES: CheckpointSql = CheckpointSql {
    create: r#"CREATE TABLE IF NOT EXISTS "eventsource_projection_checkpoints" ("projection" TEXT PRIMARY KEY, "position" BIGINT NOT NULL, "updated_at" TIMESTAMPTZ NOT NULL DEFAULT now())"#,
    read: r#"SELECT "position" FROM "eventsource_projection_checkpoints" WHERE "projection" = $1 FOR UPDATE"#,
    advance: r#"INSERT INTO "eventsource_projection_checkpoints" AS c ("projection", "position", "updated_at") VALUES ($1, $2, now()) ON CONFLICT ("projection") DO UPDATE SET "position" = EXCLUDED."position", "updated_at" = EXCLUDED."updated_at" WHERE c."position" < EXCLUDED."position" RETURNING 1"#,
    delete: r#"DELETE FROM "eventsource_projection_checkpoints" WHERE "projection" = $1"#,
};

const SQLITE: CheckpointSql = CheckpointSql {
    create: r#"CREATE TABLE IF NOT EXISTS "eventsource_projection_checkpoints" ("projection" TEXT PRIMARY KEY, "position" INTEGER NOT NULL, "updated_at" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))"#,
    read: r#"SELECT "position" FROM "eventsource_projection_checkpoints" WHERE "projection" = ?1"#,
    advance: r#"INSERT INTO "eventsource_projection_checkpoints" AS c ("projection", "position", "updated_at") VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) ON CONFLICT ("projection") DO UPDATE SET "position" = excluded."position", "updated_at" = excluded."updated_at" WHERE c."position" < excluded."position" RETURNING 1"#,
    delete: r#"DELETE FROM "eventsource_projection_checkpoints" WHERE "projection" = ?1"#,
};

impl CheckpointSql {
    /// The statements for `dialect`.
    pub fn for_dialect(dialect: Dialect) -> &'static CheckpointSql {
        Self::for_dialect_const(dialect)
    }

    /// [`CheckpointSql::for_dialect`], usable in constants.
    pub const fn for_dialect_const(dialect: Dialect) -> &'static CheckpointSql {
        match dialect {
            Dialect::Postgres => &POSTGRES,
            Dialect::Sqlite => &SQLITE,
        }
    }
}
