//! Field descriptors: [`FieldDescriptor`] and its parts, and typed column
//! names ([`Column`]). The field types are [`FieldType`] (`field_type.rs`). The Rust type -> field type map is
//! [`FieldKind`].

use std::fmt;

use super::field_type::FieldType;
use super::kind::FieldKind;

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
/// use pgcoord::readmodels::{DefaultValue, FieldDescriptor, FieldType};
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
    /// use pgcoord::readmodels::{FieldDescriptor, FieldType};
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
/// use pgcoord::readmodels::{Column, Filter};
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
