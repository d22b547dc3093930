//! [`FieldType`]: the type of a read-model field as the schema generator
//! and the adapters see it. The bottom of the read-model ports: it imports
//! nothing of theirs.

use std::fmt;

/// The type of a read-model field, as the schema generator and the
/// adapters see it.
///
/// | type | PostgreSQL | SQLite | serde form of the value |
/// |---|---|---|---|
/// | `Uuid` | `UUID` | `TEXT` | string |
/// | `Text` | `TEXT` | `TEXT` | string |
/// | `Integer` | `BIGINT` | `INTEGER` | integer (`i64`) |
/// | `Float` | `DOUBLE PRECISION` | `REAL` | number |
/// | `Decimal` | `NUMERIC` | `TEXT` (compared as a number) | string (or number) |
/// | `Bool` | `BOOLEAN` | `INTEGER` (0/1) | bool |
/// | `Timestamp` | `TIMESTAMPTZ` | `TEXT` (fixed-width RFC 3339) | RFC 3339 string |
/// | `Date` | `DATE` | `TEXT` (`YYYY-MM-DD`) | `YYYY-MM-DD` string |
/// | `Json` | `JSONB` | `TEXT` | any JSON |
/// | `Bytes` | `BYTEA` | `BLOB` | array of bytes |
/// | `Other(_)` | `TEXT` | `TEXT` | string |
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldType {
    /// A UUID.
    Uuid,
    /// A UTF-8 string.
    Text,
    /// A 64-bit signed integer.
    Integer,
    /// A 64-bit float.
    Float,
    /// An exact decimal number, carried as its decimal text.
    Decimal,
    /// A boolean.
    Bool,
    /// An instant in UTC (microsecond precision).
    Timestamp,
    /// A calendar date.
    Date,
    /// Arbitrary JSON.
    Json,
    /// A byte string.
    Bytes,
    /// Any other type, named for documentation; stored as text (the serde
    /// form must be a string, as for unit-variant enums).
    Other(String),
}

impl FieldType {
    /// True when values of this type can be filtered and ordered by.
    /// JSON and byte fields cannot.
    pub fn is_queryable(&self) -> bool {
        !matches!(self, FieldType::Json | FieldType::Bytes)
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Uuid => f.write_str("uuid"),
            FieldType::Text => f.write_str("text"),
            FieldType::Integer => f.write_str("integer"),
            FieldType::Float => f.write_str("float"),
            FieldType::Decimal => f.write_str("decimal"),
            FieldType::Bool => f.write_str("bool"),
            FieldType::Timestamp => f.write_str("timestamp"),
            FieldType::Date => f.write_str("date"),
            FieldType::Json => f.write_str("json"),
            FieldType::Bytes => f.write_str("bytes"),
            FieldType::Other(name) => write!(f, "{name}"),
        }
    }
}
