//! The model's unique indexes, enforced in memory as the SQL backends'
//! `CREATE UNIQUE INDEX` enforces them: over every row, soft-deleted ones
//! included (the index has no predicate on SQLite, and none on PostgreSQL
//! unless the index declares `where`); a key with a NULL in it never
//! collides (SQL's NULL is equal to nothing).

use super::*;
use crate::ports::error::{BackendError, BackendErrorKind, Error};
use crate::ports::readmodels::IndexDescriptor;
use crate::ports::sql_state::SqlState;

/// One unique index: its name as the SQL schema gives it, and the columns.
#[derive(Debug)]
pub(super) struct UniqueIndex {
    name: String,
    columns: Vec<String>,
}

/// The unique indexes of a model (none for most models: then checking
/// costs nothing).
pub(super) fn unique_indexes(table: &str, indexes: &[IndexDescriptor]) -> Arc<[UniqueIndex]> {
    indexes
        .iter()
        .filter(|i| i.unique)
        .map(|i| UniqueIndex {
            // The name `sql::schema::create_indexes` gives the index.
            name: i.name_on(table),
            columns: i.columns.clone(),
        })
        .collect()
}

impl UniqueIndex {
    fn key(&self, record: &Record, fields: &[FieldDescriptor]) -> Option<Vec<Value>> {
        let key: Vec<Value> = self
            .columns
            .iter()
            .map(|c| record.column(c, fields).unwrap_or(Value::Null))
            .collect();
        // A key with a NULL in it is unique by definition.
        (!key.iter().any(Value::is_null)).then_some(key)
    }
}

/// Fails as PostgreSQL does (SQLSTATE 23505, `unique_violation`) when the
/// row `id` of `rows` has the key of another row under a unique index.
pub(super) fn check(
    indexes: &[UniqueIndex],
    table: &str,
    fields: &[FieldDescriptor],
    rows: &Rows,
    record: &Record,
) -> Result<()> {
    for index in indexes {
        let Some(key) = index.key(record, fields) else {
            continue;
        };
        let taken = rows.values().any(|other| {
            other.meta.id != record.meta.id && index.key(other, fields).as_ref() == Some(&key)
        });
        if taken {
            let values: Vec<String> = key.iter().map(|v| v.to_json().to_string()).collect();
            let message = format!(
                "duplicate key value violates unique constraint \"{}\": key ({})=({}) \
                 already exists in {table}",
                index.name,
                index.columns.join(", "),
                values.join(", ")
            );
            return Err(Error::Backend(
                BackendError::new(BackendErrorKind::Query, message)
                    .with_code(SqlState::UNIQUE_VIOLATION),
            ));
        }
    }
    Ok(())
}
