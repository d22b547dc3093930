//! The plain rusqlite connection under a [`SqliteDatabase`](super::SqliteDatabase):
//! the settings every connection is opened with, and reading a table's
//! columns.

use std::path::Path;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::Connection;

use crate::adapters::sql::SQLITE_DECIMAL_COLLATION;
use crate::ports::error::Result;
use crate::ports::readmodels::storage::decimal_order;

use super::error::{sqlite_error, wal_error};

/// The `busy_timeout` every connection gets, in milliseconds.
pub const BUSY_TIMEOUT_MS: u64 = 5000;

/// Sets the pragmas of a connection to the database file at `file`
/// (`None`: in memory, where WAL does not apply).
///
/// Decimal text compares by exact value through the collation
/// [`SQLITE_DECIMAL_COLLATION`] (the statements name it).
///
/// Double-quoted string literals are turned off (`SQLITE_DBCONFIG_DQS_DML`
/// and `_DDL`): otherwise SQLite reads `"tier"` naming no column as the
/// text `'tier'`, and a model read before `migrate_schema` added its
/// column gets the column's name as its value instead of an error.
pub(super) fn configure(conn: &Connection, file: Option<&Path>) -> Result<()> {
    for dqs in [
        DbConfig::SQLITE_DBCONFIG_DQS_DML,
        DbConfig::SQLITE_DBCONFIG_DQS_DDL,
    ] {
        conn.set_db_config(dqs, false).map_err(sqlite_error)?;
    }
    conn.create_collation(SQLITE_DECIMAL_COLLATION, decimal_order)
        .map_err(sqlite_error)?;
    conn.execute_batch("PRAGMA foreign_keys = ON")
        .map_err(sqlite_error)?;
    conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
        .map_err(sqlite_error)?;
    if let Some(file) = file {
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| wal_error(file, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "SQLite refused journal_mode=WAL");
        }
    }
    Ok(())
}

pub(super) fn table_columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .map_err(sqlite_error)?;
    let names = stmt
        .query_map([table], |r| r.get::<_, String>(0))
        .map_err(sqlite_error)?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(sqlite_error)?;
    Ok(names)
}
