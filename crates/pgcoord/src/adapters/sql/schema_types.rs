//! The type maps of the schema generator: each [`FieldType`]'s column type
//! on PostgreSQL and SQLite, a field's effective type (with its override),
//! and default values and string literals as SQL text.

use crate::ports::readmodels::{DefaultValue, FieldDescriptor, FieldType};

use super::Dialect;

/// The PostgreSQL type of each [`FieldType`] (anything else: `TEXT`).
pub fn postgres_type(field_type: &FieldType) -> &'static str {
    match field_type {
        FieldType::Uuid => "UUID",
        FieldType::Text => "TEXT",
        FieldType::Integer => "BIGINT",
        FieldType::Float => "DOUBLE PRECISION",
        FieldType::Decimal => "NUMERIC",
        FieldType::Bool => "BOOLEAN",
        FieldType::Timestamp => "TIMESTAMPTZ",
        FieldType::Date => "DATE",
        FieldType::Json => "JSONB",
        FieldType::Bytes => "BYTEA",
        FieldType::Other(_) => "TEXT",
    }
}

/// The SQLite type of each [`FieldType`] (anything else: `TEXT`).
///
/// UUIDs, timestamps and dates are stored as text in fixed-width forms that
/// sort like the values they encode. Decimals are stored as text, so they
/// read back exactly as written (`"12.50"` stays `"12.50"`), and are
/// compared and ordered by exact value through the `pgcoord_decimal`
/// collation every connection of the library registers.
pub fn sqlite_type(field_type: &FieldType) -> &'static str {
    match field_type {
        FieldType::Uuid => "TEXT",
        FieldType::Text => "TEXT",
        FieldType::Integer => "INTEGER",
        FieldType::Float => "REAL",
        FieldType::Decimal => "TEXT",
        FieldType::Bool => "INTEGER",
        FieldType::Timestamp => "TEXT",
        FieldType::Date => "TEXT",
        FieldType::Json => "TEXT",
        FieldType::Bytes => "BLOB",
        FieldType::Other(_) => "TEXT",
    }
}

/// The SQL type of a field on `dialect`: the field's override for that
/// backend, else its override for all backends, else the type map.
pub fn column_type(dialect: Dialect, field: &FieldDescriptor) -> String {
    let specific = match dialect {
        Dialect::Postgres => &field.sql_type.postgres,
        Dialect::Sqlite => &field.sql_type.sqlite,
    };
    if let Some(t) = specific.as_ref().or(field.sql_type.all.as_ref()) {
        return t.clone();
    }
    match dialect {
        Dialect::Postgres => postgres_type(&field.field_type),
        Dialect::Sqlite => sqlite_type(&field.field_type),
    }
    .to_owned()
}

/// The SQL literal of a default on `dialect`.
pub fn default_literal(dialect: Dialect, default: &DefaultValue) -> String {
    match default {
        DefaultValue::Bool(b) => match (dialect, b) {
            (Dialect::Postgres, true) => "TRUE".into(),
            (Dialect::Postgres, false) => "FALSE".into(),
            (Dialect::Sqlite, true) => "1".into(),
            (Dialect::Sqlite, false) => "0".into(),
        },
        DefaultValue::Integer(i) => i.to_string(),
        DefaultValue::Float(f) => {
            let text = f.to_string();
            if text.contains(['.', 'e', 'E', 'N', 'i']) {
                text
            } else {
                format!("{text}.0")
            }
        }
        DefaultValue::Text(s) => quote_literal(s),
        DefaultValue::Expression(e) => e.clone(),
    }
}

/// Quotes a string literal: `'` around it, embedded `'` doubled.
pub fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
