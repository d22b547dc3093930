//! One statement and how it is built: [`Statement`] and its [`Param`]s,
//! the placeholder-numbering `Builder`, and the per-dialect casts and
//! comparisons every repository statement uses.

use std::sync::Arc;

use crate::adapters::sql::Dialect;
use crate::ports::readmodels::{FieldType, Value};

/// A bound parameter: a value and the type of the field it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The value (may be NULL for writes).
    pub value: Value,
    /// The field's type, which decides how the adapter binds it.
    pub field_type: FieldType,
}

/// One SQL statement with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The SQL text, with `$n` (PostgreSQL) or `?n` (SQLite) placeholders;
    /// shared, so the hot statements' texts are built once per table and
    /// not copied per call.
    pub sql: Arc<str>,
    /// The parameters, in placeholder order.
    pub params: Vec<Param>,
}

/// A placeholder for parameter `n` of a field of type `field_type`.
pub(super) fn placeholder(dialect: Dialect, n: usize, field_type: &FieldType) -> String {
    match dialect {
        Dialect::Postgres => format!("${n}::{}", postgres_param_type(field_type)),
        Dialect::Sqlite => format!("?{n}"),
    }
}

/// Builds one statement, numbering placeholders.
pub(super) struct Builder {
    pub(super) dialect: Dialect,
    pub(super) sql: String,
    pub(super) params: Vec<Param>,
}

impl Builder {
    pub(super) fn bind(&mut self, value: Value, field_type: &FieldType) -> String {
        self.params.push(Param {
            value,
            field_type: field_type.clone(),
        });
        let n = self.params.len();
        match self.dialect {
            Dialect::Postgres => format!("${n}::{}", postgres_param_type(field_type)),
            Dialect::Sqlite => format!("?{n}"),
        }
    }

    /// A placeholder for the right-hand side of a comparison: as
    /// [`Builder::bind`], but SQLite decimals compare as numbers.
    pub(super) fn bind_compared(&mut self, value: Value, field_type: &FieldType) -> String {
        let p = self.bind(value, field_type);
        compared(self.dialect, p, field_type)
    }

    pub(super) fn push(&mut self, s: &str) {
        self.sql.push_str(s);
    }

    pub(super) fn finish(self) -> Statement {
        Statement {
            sql: self.sql.into(),
            params: self.params,
        }
    }
}

/// The PostgreSQL type a parameter of each field type is cast to; also the
/// type each column is read back as.
pub(super) fn postgres_param_type(field_type: &FieldType) -> &'static str {
    match field_type {
        FieldType::Uuid => "uuid",
        FieldType::Text | FieldType::Other(_) => "text",
        FieldType::Integer => "int8",
        FieldType::Float => "float8",
        FieldType::Decimal => "text::numeric",
        FieldType::Bool => "bool",
        FieldType::Timestamp => "timestamptz",
        FieldType::Date => "date",
        FieldType::Json => "jsonb",
        FieldType::Bytes => "bytea",
    }
}

pub(super) fn postgres_read_type(field_type: &FieldType) -> &'static str {
    match field_type {
        FieldType::Decimal => "text",
        other => postgres_param_type(other),
    }
}

/// The SQLite collation that orders decimal text by exact value, which
/// every connection the SQLite adapter opens registers.
pub(crate) const SQLITE_DECIMAL_COLLATION: &str = "pgcoord_decimal";

/// A column (already quoted, possibly table-qualified) as equality tests
/// see it. SQLite keeps decimals as text (so they read back exactly as
/// written) and compares them by exact value through a collation (a
/// `CAST(... AS NUMERIC)` would round to a double beyond 15 digits).
pub(super) fn compared(dialect: Dialect, quoted: String, field_type: &FieldType) -> String {
    match (dialect, field_type) {
        (Dialect::Sqlite, FieldType::Decimal) => {
            format!("{quoted} COLLATE {SQLITE_DECIMAL_COLLATION}")
        }
        _ => quoted,
    }
}

/// A column as range tests and ordering see it: text byte-wise everywhere
/// (SQLite's default collation already is), decimals as numbers.
pub(super) fn collated(dialect: Dialect, quoted: String, field_type: &FieldType) -> String {
    match (dialect, field_type) {
        (Dialect::Postgres, FieldType::Text | FieldType::Other(_)) => {
            format!(r#"{quoted}::text COLLATE "C""#)
        }
        _ => compared(dialect, quoted, field_type),
    }
}
