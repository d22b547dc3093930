//! [`SqliteReadModelRepository`]: the read-model port on SQLite.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use std::borrow::Cow;

use chrono::NaiveDate;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::Connection;
use uuid::Uuid;

use crate::adapters::sql::{Dialect, SqlTable, Statement};
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};
use crate::ports::readmodels::storage::{now_micros, DeletedRows, Record};
use crate::ports::readmodels::{
    FieldDescriptor, FieldType, Query, ReadModel, ReadModelError, ReadModelRepository, Value,
};

use super::database::{Access, SqliteDatabase};
use super::error::sqlite_error;
use super::timestamp;
use super::transaction::SqliteTransaction;

mod repository;

/// A read-model repository on SQLite.
///
/// Made by [`SqliteDatabase::repository`] (each call its own statement, in
/// autocommit mode; `save_many` in one transaction) or
/// [`SqliteTransaction::repository`]
/// (inside that transaction, never committing). Cheap to clone.
///
/// Storage: UUIDs as lowercase hyphenated text, timestamps as fixed-width
/// RFC 3339 text (microseconds, `Z`), dates as `YYYY-MM-DD`, booleans as
/// 0/1, JSON as text, so that SQLite's comparisons and sort order agree
/// with the other backends.
pub struct SqliteReadModelRepository<M> {
    db: SqliteDatabase,
    access: Access,
    table: Arc<SqlTable>,
    _model: PhantomData<fn() -> M>,
}

impl SqliteDatabase {
    /// A repository for `M` on this database (the table must exist; see
    /// [`SqliteDatabase::create_schema`]).
    pub fn repository<M: ReadModel>(&self) -> SqliteReadModelRepository<M> {
        SqliteReadModelRepository::new(self.clone(), Access::Gated)
    }
}

impl SqliteTransaction {
    /// A repository for `M` bound to this transaction. Its calls fail once
    /// the transaction has ended.
    pub fn repository<M: ReadModel>(&self) -> SqliteReadModelRepository<M> {
        SqliteReadModelRepository::new(self.database().clone(), self.access())
    }
}

impl<M: ReadModel> SqliteReadModelRepository<M> {
    pub(crate) fn new(db: SqliteDatabase, access: Access) -> Self {
        Self {
            db,
            access,
            table: Arc::new(SqlTable::new(Dialect::Sqlite, M::table_name(), M::fields())),
            _model: PhantomData,
        }
    }

    /// This repository bound to `tx`, sharing its statements (built once
    /// per repository, not once per transaction).
    pub(super) fn bound_to(&self, tx: &SqliteTransaction) -> Self {
        Self {
            db: tx.database().clone(),
            access: tx.access(),
            table: self.table.clone(),
            _model: PhantomData,
        }
    }

    /// The database this repository uses.
    pub fn database(&self) -> &SqliteDatabase {
        &self.db
    }

    /// Runs `f` on the connection with this repository's access mode.
    pub(super) async fn with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &SqlTable) -> Result<T> + Send + 'static,
    {
        let table = self.table.clone();
        self.db.run(&self.access, move |c| f(c, &table)).await
    }

    fn decode_all(&self, records: Vec<Record>) -> Result<Vec<M>> {
        records
            .into_iter()
            .map(|r| Ok(r.into_model(self.table.fields())?))
            .collect()
    }

    fn not_found(&self, id: Uuid) -> Error {
        ReadModelError::NotFound {
            table: self.table.table().to_owned(),
            id,
        }
        .into()
    }

    pub(super) fn in_transaction(&self) -> bool {
        matches!(self.access, Access::InTransaction(_))
    }
}

impl<M> Clone for SqliteReadModelRepository<M> {
    fn clone(&self) -> Self {
        Self {
            db: self.db.clone(),
            access: self.access.clone(),
            table: self.table.clone(),
            _model: PhantomData,
        }
    }
}

impl<M> fmt::Debug for SqliteReadModelRepository<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteReadModelRepository")
            .field("table", &self.table.table())
            .field("db", &self.db)
            .field(
                "in_transaction",
                &matches!(self.access, Access::InTransaction(_)),
            )
            .finish()
    }
}

fn to_sql(value: &Value) -> SqlValue {
    match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Integer(i) => SqlValue::Integer(*i),
        Value::Float(f) => SqlValue::Real(*f),
        Value::Decimal(s) | Value::Text(s) => SqlValue::Text(s.clone()),
        Value::Uuid(u) => {
            let mut buf = Uuid::encode_buffer();
            SqlValue::Text(u.hyphenated().encode_lower(&mut buf).to_owned())
        }
        Value::Timestamp(t) => SqlValue::Text(timestamp::format(t)),
        Value::Date(d) => SqlValue::Text(d.format("%Y-%m-%d").to_string()),
        Value::Json(j) => SqlValue::Text(j.to_string()),
        Value::Bytes(b) => SqlValue::Blob(b.clone()),
        // `Value` is non-exhaustive only towards other crates.
    }
}

fn decode_error(column: &str, field_type: &FieldType, got: &str) -> Error {
    ReadModelError::schema_mismatch(
        String::new(),
        column,
        format!("the stored value ({got}) does not decode as {field_type}"),
    )
    .into()
}

fn from_sql<'r>(raw: ValueRef<'r>, field: &FieldDescriptor) -> Result<Value> {
    let ty = &field.field_type;
    let bad = |what: &str| decode_error(&field.name, ty, what);
    // Borrowed from SQLite's row where it is text already: only the text
    // fields themselves need a copy.
    let text = |raw: ValueRef<'r>| -> Result<Cow<'r, str>> {
        match raw {
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(Cow::Borrowed)
                .map_err(|_| bad("non-UTF-8 text")),
            ValueRef::Integer(i) => Ok(Cow::Owned(i.to_string())),
            ValueRef::Real(r) => Ok(Cow::Owned(r.to_string())),
            _ => Err(bad("a blob")),
        }
    };
    if let ValueRef::Null = raw {
        return Ok(Value::Null);
    }
    Ok(match ty {
        FieldType::Text | FieldType::Other(_) => Value::Text(text(raw)?.into_owned()),
        FieldType::Decimal => Value::Decimal(text(raw)?.into_owned()),
        FieldType::Uuid => {
            let s = text(raw)?;
            Value::Uuid(Uuid::parse_str(&s).map_err(|_| bad(&format!("{s:?}")))?)
        }
        FieldType::Integer => match raw {
            ValueRef::Integer(i) => Value::Integer(i),
            _ => return Err(bad("a non-integer")),
        },
        FieldType::Float => match raw {
            ValueRef::Real(r) => Value::Float(r),
            ValueRef::Integer(i) => Value::Float(i as f64),
            _ => return Err(bad("a non-number")),
        },
        FieldType::Bool => match raw {
            ValueRef::Integer(i) => Value::Bool(i != 0),
            _ => return Err(bad("a non-integer")),
        },
        FieldType::Timestamp => {
            let s = text(raw)?;
            Value::Timestamp(timestamp::parse(&s).ok_or_else(|| bad(&format!("{s:?}")))?)
        }
        FieldType::Date => {
            let s = text(raw)?;
            Value::Date(
                NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_err(|_| bad(&format!("{s:?}")))?,
            )
        }
        FieldType::Json => {
            let s = text(raw)?;
            Value::Json(serde_json::from_str(&s).map_err(|_| bad("invalid JSON"))?)
        }
        FieldType::Bytes => match raw {
            ValueRef::Blob(b) => Value::Bytes(b.to_vec()),
            ValueRef::Text(t) => Value::Bytes(t.to_vec()),
            _ => return Err(bad("a number")),
        },
    })
}

/// A parameter bound by reference: text, decimals and blobs are lent to
/// SQLite, not copied.
struct LiteParam<'a>(&'a Value);

impl rusqlite::ToSql for LiteParam<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput;
        Ok(match self.0 {
            Value::Text(s) | Value::Decimal(s) => {
                ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes()))
            }
            Value::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            other => ToSqlOutput::Owned(to_sql(other)),
        })
    }
}

fn params(stmt: &Statement) -> impl Iterator<Item = LiteParam<'_>> {
    stmt.params.iter().map(|p| LiteParam(&p.value))
}

/// Runs a row-returning statement and decodes every row.
fn query_records(conn: &Connection, table: &SqlTable, stmt: &Statement) -> Result<Vec<Record>> {
    let mut prepared = conn.prepare_cached(&stmt.sql).map_err(sqlite_error)?;
    let mut rows = prepared
        .query(rusqlite::params_from_iter(params(stmt)))
        .map_err(sqlite_error)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        out.push(decode_row(row, table)?);
    }
    Ok(out)
}

/// Runs a statement that returns at most one row (by primary key) and
/// decodes that row straight into `M`: one step, no vector of records.
fn query_first<M: ReadModel>(
    conn: &Connection,
    table: &SqlTable,
    stmt: &Statement,
) -> Result<Option<M>> {
    let mut prepared = conn.prepare_cached(&stmt.sql).map_err(sqlite_error)?;
    let mut rows = prepared
        .query(rusqlite::params_from_iter(params(stmt)))
        .map_err(sqlite_error)?;
    match rows.next().map_err(sqlite_error)? {
        Some(row) => Ok(Some(decode_row(row, table)?.into_model(table.fields())?)),
        None => Ok(None),
    }
}

/// One row, in [`SqlTable::columns`] order, as a record.
fn decode_row(row: &rusqlite::Row<'_>, table: &SqlTable) -> Result<Record> {
    let columns = table.columns();
    let mut values = Vec::with_capacity(columns.len());
    for (i, field) in columns.iter().enumerate() {
        let raw = row.get_ref(i).map_err(sqlite_error)?;
        values.push(from_sql(raw, field).map_err(|e| with_table(e, table.table()))?);
    }
    table.record_from_row(values).ok_or_else(|| {
        Error::from(ReadModelError::schema_mismatch(
            table.table(),
            "id",
            "a base column holds an unexpected value",
        ))
    })
}

fn with_table(e: Error, table: &str) -> Error {
    match e {
        Error::ReadModel(ReadModelError::SchemaMismatch {
            column,
            reason,
            source,
            ..
        }) => ReadModelError::SchemaMismatch {
            table: table.to_owned(),
            column,
            reason,
            source,
        }
        .into(),
        other => other,
    }
}

fn execute(conn: &Connection, stmt: &Statement) -> Result<usize> {
    let mut prepared = conn.prepare_cached(&stmt.sql).map_err(sqlite_error)?;
    prepared
        .execute(rusqlite::params_from_iter(params(stmt)))
        .map_err(sqlite_error)
}

fn scalar_i64(conn: &Connection, stmt: &Statement) -> Result<Option<i64>> {
    let mut prepared = conn.prepare_cached(&stmt.sql).map_err(sqlite_error)?;
    let mut rows = prepared
        .query(rusqlite::params_from_iter(params(stmt)))
        .map_err(sqlite_error)?;
    match rows.next().map_err(sqlite_error)? {
        Some(row) => Ok(Some(row.get::<_, i64>(0).map_err(sqlite_error)?)),
        None => Ok(None),
    }
}

fn backend(message: &str) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, message))
}
