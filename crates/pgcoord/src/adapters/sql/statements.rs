//! [`SqlTable`]: the repository statements of one read-model table, built
//! from checked queries for PostgreSQL or SQLite.
//!
//! Both SQL adapters run exactly these statements, so the query semantics
//! (NULLs, empty lists, collation, order, paging) are written down once.
//! Values never enter the SQL text: each becomes a [`Param`] with its field
//! type, and the adapter binds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::ports::readmodels::storage::{base_fields, DeletedRows, Record};
use crate::ports::readmodels::{FieldDescriptor, FieldType, Value};

use super::{quote_ident, Dialect};

mod builder;
mod select;

#[cfg(feature = "sqlite")]
pub(crate) use self::builder::SQLITE_DECIMAL_COLLATION;
use self::builder::{collated, compared, placeholder, postgres_read_type, Builder};
pub use self::builder::{Param, Statement};

/// The statements of one read-model table on one dialect.
///
/// Rows come back with the base columns first (`id`, `created_at`,
/// `updated_at`, `version`, `deleted_at`), then the user fields in
/// descriptor order; see [`SqlTable::columns`].
#[derive(Debug, Clone)]
pub struct SqlTable {
    dialect: Dialect,
    table: String,
    fields: Vec<FieldDescriptor>,
    columns: Vec<FieldDescriptor>,
    select_list: String,
    /// The texts of the hottest statements, built with the table: `get`
    /// by [`DeletedRows`] policy, then the one-row upsert.
    hot: HotTexts,
    /// SQL texts that depend only on their shape (statement, row count),
    /// built once: the hot statements skip the formatting.
    texts: Arc<Mutex<SqlTexts>>,
}

/// The prebuilt texts of [`SqlTable::get`] and of the one-row upsert.
#[derive(Debug, Clone, Default)]
struct HotTexts {
    get: [Arc<str>; 3],
    upsert_one: Arc<str>,
}

/// SQL texts by (statement, shape).
type SqlTexts = HashMap<(&'static str, usize), Arc<str>>;

/// The most cached SQL texts per table (batch sizes vary).
const MAX_CACHED_TEXTS: usize = 64;

impl SqlTable {
    /// The statements for `table` with user `fields`.
    pub fn new(dialect: Dialect, table: impl Into<String>, fields: Vec<FieldDescriptor>) -> Self {
        let all: Vec<FieldDescriptor> = base_fields()
            .into_iter()
            .chain(fields.iter().cloned())
            .collect();
        let select: Vec<String> = all
            .iter()
            .map(|f| match dialect {
                Dialect::Postgres => {
                    let q = quote_ident(&f.name);
                    format!("{q}::{} AS {q}", postgres_read_type(&f.field_type))
                }
                Dialect::Sqlite => quote_ident(&f.name),
            })
            .collect();
        let mut t = Self {
            dialect,
            table: table.into(),
            fields,
            columns: all,
            select_list: select.join(", "),
            hot: HotTexts::default(),
            texts: Arc::default(),
        };
        t.hot = HotTexts {
            get: [
                DeletedRows::Exclude,
                DeletedRows::Include,
                DeletedRows::Only,
            ]
            .map(|d| t.get_text(d).into()),
            upsert_one: t.upsert_text(1).into(),
        };
        t
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The user fields.
    pub fn fields(&self) -> &[FieldDescriptor] {
        &self.fields
    }

    /// Every column a row comes back with: the base columns, then the user
    /// fields.
    pub fn columns(&self) -> &[FieldDescriptor] {
        &self.columns
    }

    /// Rebuilds a record from a row's values in [`SqlTable::columns`] order.
    pub fn record_from_row(&self, mut values: Vec<Value>) -> Option<Record> {
        if values.len() != 5 + self.fields.len() {
            return None;
        }
        // Drained in place: the user values stay in the row's own vector.
        let mut base = values.drain(..5);
        let id = match base.next()? {
            Value::Uuid(u) => u,
            _ => return None,
        };
        let ts = |v: Value| match v {
            Value::Timestamp(t) => Some(t),
            _ => None,
        };
        let created_at = ts(base.next()?)?;
        let updated_at = ts(base.next()?)?;
        let version = match base.next()? {
            Value::Integer(v) => v,
            _ => return None,
        };
        let deleted_at = match base.next()? {
            Value::Null => None,
            v => Some(ts(v)?),
        };
        drop(base);
        Some(Record {
            meta: crate::ports::readmodels::ReadModelMeta {
                id,
                created_at,
                updated_at,
                version,
                deleted_at,
            },
            values,
        })
    }

    /// The SQL text of shape `key`, built by `build` the first time.
    fn text(&self, key: (&'static str, usize), build: impl FnOnce() -> String) -> Arc<str> {
        let mut texts = self.texts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = texts.get(&key) {
            return t.clone();
        }
        let t: Arc<str> = build().into();
        if texts.len() < MAX_CACHED_TEXTS {
            texts.insert(key, t.clone());
        }
        t
    }

    fn builder(&self) -> Builder {
        Builder {
            dialect: self.dialect,
            sql: String::new(),
            params: Vec::new(),
        }
    }

    fn quoted_table(&self) -> String {
        quote_ident(&self.table)
    }

    fn deleted_condition(deleted: DeletedRows) -> Option<&'static str> {
        match deleted {
            DeletedRows::Exclude => Some(r#""deleted_at" IS NULL"#),
            DeletedRows::Include => None,
            DeletedRows::Only => Some(r#""deleted_at" IS NOT NULL"#),
        }
    }

    /// The upsert of `record`: insert as given (but `updated_at = now`), or
    /// update the user fields, `updated_at = now` and `version = stored + 1`.
    /// Returns the row.
    pub fn upsert(&self, record: &Record, now: DateTime<Utc>) -> Statement {
        self.upsert_many(std::slice::from_ref(record), now)
    }

    /// One multi-row upsert of `records` (no id may appear twice). Returns
    /// the rows, in no guaranteed order.
    pub fn upsert_many(&self, records: &[Record], now: DateTime<Utc>) -> Statement {
        let mut params = Vec::with_capacity(records.len() * self.columns.len());
        for r in records {
            self.push_record_values(&mut params, r, now);
        }
        let sql = match records.len() {
            1 => self.hot.upsert_one.clone(),
            n => self.text(("upsert", n), || self.upsert_text(n)),
        };
        Statement { sql, params }
    }

    fn upsert_text(&self, rows: usize) -> String {
        let table = self.quoted_table();
        let names: Vec<String> = self
            .columns()
            .iter()
            .map(|f| quote_ident(&f.name))
            .collect();
        let mut sql = format!("INSERT INTO {table} ({}) VALUES ", names.join(", "));
        let mut n = 0;
        for row in 0..rows {
            if row > 0 {
                sql.push_str(", ");
            }
            let placeholders: Vec<String> = self
                .columns
                .iter()
                .map(|f| {
                    n += 1;
                    placeholder(self.dialect, n, &f.field_type)
                })
                .collect();
            sql.push_str(&format!("({})", placeholders.join(", ")));
        }
        sql.push_str(r#" ON CONFLICT ("id") DO UPDATE SET "#);
        let mut sets: Vec<String> = self
            .fields
            .iter()
            .map(|f| {
                let q = quote_ident(&f.name);
                format!("{q} = EXCLUDED.{q}")
            })
            .collect();
        // Every inserted row carries `now` as its `updated_at` already.
        sets.push(r#""updated_at" = EXCLUDED."updated_at""#.to_owned());
        sets.push(format!(r#""version" = {table}."version" + 1"#));
        sql.push_str(&sets.join(", "));
        sql.push_str(&format!(" RETURNING {}", self.select_list));
        sql
    }

    /// The update of `record` only where the stored version equals the
    /// record's. Returns the row, or nothing.
    pub fn update_if_version(&self, record: &Record, now: DateTime<Utc>) -> Statement {
        let mut b = self.builder();
        b.push(&format!("UPDATE {} SET ", self.quoted_table()));
        let mut sets = Vec::new();
        for (field, value) in self.fields.iter().zip(&record.values) {
            let p = b.bind(value.clone(), &field.field_type);
            sets.push(format!("{} = {p}", quote_ident(&field.name)));
        }
        let now_p = b.bind(Value::Timestamp(now), &FieldType::Timestamp);
        sets.push(format!(r#""updated_at" = {now_p}"#));
        sets.push(r#""version" = "version" + 1"#.to_owned());
        b.push(&sets.join(", "));
        let id_p = b.bind(Value::Uuid(record.meta.id), &FieldType::Uuid);
        let version_p = b.bind(Value::Integer(record.meta.version), &FieldType::Integer);
        b.push(&format!(
            r#" WHERE "id" = {id_p} AND "version" = {version_p} RETURNING {}"#,
            self.select_list
        ));
        b.finish()
    }

    /// `SELECT "version"` of a row, soft-deleted or not.
    pub fn version_of(&self, id: Uuid) -> Statement {
        let mut b = self.builder();
        b.push(&format!(
            r#"SELECT "version" FROM {} WHERE "id" = "#,
            self.quoted_table()
        ));
        let p = b.bind(Value::Uuid(id), &FieldType::Uuid);
        b.push(&p);
        b.finish()
    }

    /// `DELETE` of one row.
    pub fn delete(&self, id: Uuid) -> Statement {
        let mut b = self.builder();
        b.push(&format!(
            r#"DELETE FROM {} WHERE "id" = "#,
            self.quoted_table()
        ));
        let p = b.bind(Value::Uuid(id), &FieldType::Uuid);
        b.push(&p);
        b.finish()
    }

    /// Sets (`deleted = true`) or clears `deleted_at` where that changes it.
    pub fn set_deleted(&self, id: Uuid, deleted: bool, now: DateTime<Utc>) -> Statement {
        let mut b = self.builder();
        let now_p = b.bind(Value::Timestamp(now), &FieldType::Timestamp);
        let id_p = b.bind(Value::Uuid(id), &FieldType::Uuid);
        let (set, cond) = if deleted {
            (now_p.clone(), "IS NULL")
        } else {
            ("NULL".to_owned(), "IS NOT NULL")
        };
        b.push(&format!(
            r#"UPDATE {} SET "deleted_at" = {set}, "updated_at" = {now_p} WHERE "id" = {id_p} AND "deleted_at" {cond}"#,
            self.quoted_table()
        ));
        b.finish()
    }

    /// `DELETE` of every row.
    pub fn truncate(&self) -> Statement {
        Statement {
            sql: format!("DELETE FROM {}", self.quoted_table()).into(),
            params: Vec::new(),
        }
    }

    /// Appends the column values of a record as inserted (`updated_at` =
    /// `now`), with types, in [`SqlTable::columns`] order.
    fn push_record_values(&self, out: &mut Vec<Param>, record: &Record, now: DateTime<Utc>) {
        let m = &record.meta;
        let base = [
            Value::Uuid(m.id),
            Value::Timestamp(m.created_at),
            Value::Timestamp(now),
            Value::Integer(m.version),
            m.deleted_at.map_or(Value::Null, Value::Timestamp),
        ];
        let values = base.into_iter().chain(record.values.iter().cloned());
        out.extend(values.zip(&self.columns).map(|(value, f)| Param {
            value,
            field_type: f.field_type.clone(),
        }));
    }
}
