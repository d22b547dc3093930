//! Field descriptors: [`FieldType`], [`FieldDescriptor`] and its parts, and
//! typed column names ([`Column`]). The Rust type -> field type map is
//! [`FieldKind`].

use std::fmt;

use super::kind::FieldKind;

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

/// A literal column default used by the schema generator.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DefaultValue {
    /// `TRUE`/`FALSE` on PostgreSQL, `1`/`0` on SQLite.
    Bool(bool),
    /// An integer literal.
    Integer(i64),
    /// A float literal.
    Float(f64),
    /// A string literal, quoted with `'` (embedded quotes doubled).
    Text(String),
    /// An SQL expression written verbatim, e.g. `CURRENT_TIMESTAMP`.
    Expression(String),
}

/// A per-field SQL type that replaces the generator's type map: one type for
/// every backend, or one per backend (`None` keeps the type map's choice).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SqlTypeOverride {
    /// The type for every backend, unless a backend-specific one is set.
    pub all: Option<String>,
    /// The PostgreSQL type.
    pub postgres: Option<String>,
    /// The SQLite type.
    pub sqlite: Option<String>,
}

/// One user column of a read model.
///
/// ```
/// use eventsource::ports::readmodels::{DefaultValue, FieldDescriptor, FieldType};
/// let status = FieldDescriptor::new("status", FieldType::Text)
///     .with_default(DefaultValue::Text("open".into()))
///     .with_sql_type("VARCHAR(16)");
/// assert!(!status.nullable);
/// let note = FieldDescriptor::new("note", FieldType::Text).nullable();
/// assert!(note.nullable);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDescriptor {
    /// The column name; also the key of the field in the model's serde form.
    pub name: String,
    /// The field's type.
    pub field_type: FieldType,
    /// True when the column accepts NULL (an `Option` field).
    pub nullable: bool,
    /// The column default, if any.
    pub default: Option<DefaultValue>,
    /// A replacement for the type map's SQL type.
    pub sql_type: SqlTypeOverride,
}

impl FieldDescriptor {
    /// A non-nullable field without default.
    pub fn new(name: impl Into<String>, field_type: FieldType) -> Self {
        Self {
            name: name.into(),
            field_type,
            nullable: false,
            default: None,
            sql_type: SqlTypeOverride::default(),
        }
    }

    /// A field whose type and nullability follow from the Rust type `T`
    /// (see [`FieldKind`]): `Option<T>` is nullable.
    ///
    /// ```
    /// use eventsource::ports::readmodels::{FieldDescriptor, FieldType};
    /// let note = FieldDescriptor::of::<Option<String>>("note");
    /// assert_eq!((note.field_type, note.nullable), (FieldType::Text, true));
    /// let total = FieldDescriptor::of::<i64>("total_cents");
    /// assert_eq!((total.field_type, total.nullable), (FieldType::Integer, false));
    /// ```
    pub fn of<T: FieldKind>(name: impl Into<String>) -> Self {
        let mut field = Self::new(name, T::field_type());
        field.nullable = T::nullable();
        field
    }

    /// Marks the field nullable.
    pub fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }

    /// Sets the column default.
    pub fn with_default(mut self, default: DefaultValue) -> Self {
        self.default = Some(default);
        self
    }

    /// Overrides the SQL type on every backend.
    pub fn with_sql_type(mut self, sql_type: impl Into<String>) -> Self {
        self.sql_type.all = Some(sql_type.into());
        self
    }

    /// Overrides the SQL type on PostgreSQL only.
    pub fn with_postgres_type(mut self, sql_type: impl Into<String>) -> Self {
        self.sql_type.postgres = Some(sql_type.into());
        self
    }

    /// Overrides the SQL type on SQLite only.
    pub fn with_sqlite_type(mut self, sql_type: impl Into<String>) -> Self {
        self.sql_type.sqlite = Some(sql_type.into());
        self
    }
}

/// A column name checked at compile time: the derive emits one constant per
/// field (`OrderSummary::STATUS`), usable wherever a field name is taken
/// ([`Filter`](super::Filter), [`Query::order_by`](super::Query::order_by)).
///
/// ```
/// use eventsource::ports::readmodels::{Column, Filter};
/// const STATUS: Column = Column::new("status");
/// assert_eq!(Filter::eq(STATUS, "open"), Filter::eq("status", "open"));
/// assert_eq!(STATUS.name(), "status");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Column(&'static str);

impl Column {
    /// The column called `name`.
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }

    /// The column's name.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl From<Column> for String {
    fn from(c: Column) -> String {
        c.0.to_owned()
    }
}

impl AsRef<str> for Column {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl fmt::Display for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
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
