//! The [`ReadModel`] trait, its bookkeeping columns ([`ReadModelMeta`]) and
//! the field descriptors the schema generator and the SQL adapters read.

use std::fmt;

use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ReadModelError;
use super::value::Value;

/// The bookkeeping every read model carries: identity, timestamps, version
/// and the soft-delete marker.
///
/// Embed it in the model with `#[serde(flatten)]` so that it serialises as
/// the base columns `id`, `created_at`, `updated_at`, `version` and
/// `deleted_at`.
///
/// Timestamps are kept at microsecond precision (what PostgreSQL stores), on
/// every backend, so a model reads back equal to what was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadModelMeta {
    /// The model's identity; the table's primary key.
    pub id: Uuid,
    /// When the row was first written, in UTC.
    pub created_at: DateTime<Utc>,
    /// When the row was last updated, in UTC.
    pub updated_at: DateTime<Utc>,
    /// The optimistic-concurrency version; starts at 1, grows by one on
    /// every update.
    pub version: i64,
    /// When the row was soft-deleted; `None` for live rows.
    #[serde(default)]
    pub deleted_at: Option<DateTime<Utc>>,
}

impl ReadModelMeta {
    /// Fresh bookkeeping for a new model with id `id`: version 1, both
    /// timestamps now, not deleted.
    pub fn new(id: Uuid) -> Self {
        let now = now_micros();
        Self {
            id,
            created_at: now,
            updated_at: now,
            version: 1,
            deleted_at: None,
        }
    }

    /// Fresh bookkeeping with a random (v4) id.
    pub fn new_random() -> Self {
        Self::new(Uuid::new_v4())
    }

    /// True when the row is soft-deleted.
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }
}

/// The current time, truncated to microseconds (the precision every backend
/// stores).
pub fn now_micros() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

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

/// Rust types with a natural [`FieldType`], for [`FieldDescriptor::of`].
///
/// Implemented for `String`, the integer types up to `i64` (and `u32`),
/// `f64`/`f32`, `bool`, [`Uuid`], `DateTime<Utc>`, `NaiveDate`,
/// `serde_json::Value`, `Vec<u8>`, and `Option` of any of them (nullable).
/// Implement it for your own types (e.g. a unit-variant enum as
/// `FieldType::Other("Status".into())`, a decimal type as
/// `FieldType::Decimal`).
pub trait FieldKind {
    /// The field type.
    fn field_type() -> FieldType;
    /// True when the column accepts NULL.
    fn nullable() -> bool {
        false
    }
}

macro_rules! field_kind {
    ($($t:ty => $ft:ident),* $(,)?) => {$(
        impl FieldKind for $t {
            fn field_type() -> FieldType {
                FieldType::$ft
            }
        }
    )*};
}

field_kind! {
    String => Text, i64 => Integer, i32 => Integer, i16 => Integer, i8 => Integer,
    u32 => Integer, u16 => Integer, u8 => Integer, f64 => Float, f32 => Float, bool => Bool,
    Uuid => Uuid, DateTime<Utc> => Timestamp, NaiveDate => Date, serde_json::Value => Json,
    Vec<u8> => Bytes,
}

impl<T: FieldKind> FieldKind for Option<T> {
    fn field_type() -> FieldType {
        T::field_type()
    }

    fn nullable() -> bool {
        true
    }
}

/// A declared index on a read model's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDescriptor {
    /// The index name; `idx_{table}_{columns}` when `None`.
    pub name: Option<String>,
    /// The indexed columns, in order.
    pub columns: Vec<String>,
    /// True for a unique index.
    pub unique: bool,
    /// A predicate making the index partial, applied on PostgreSQL only
    /// (SQLite gets the full index).
    pub postgres_where: Option<String>,
}

impl IndexDescriptor {
    /// A plain index on `columns`.
    pub fn on<I, S>(columns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: None,
            columns: columns.into_iter().map(Into::into).collect(),
            unique: false,
            postgres_where: None,
        }
    }

    /// Makes the index unique.
    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }

    /// Names the index.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Makes the index partial on PostgreSQL.
    pub fn postgres_where(mut self, predicate: impl Into<String>) -> Self {
        self.postgres_where = Some(predicate.into());
        self
    }
}

/// The base columns every read-model table has, in table order.
pub const BASE_COLUMNS: [&str; 5] = ["id", "created_at", "updated_at", "version", "deleted_at"];

/// The descriptors of the base columns (`id` first).
pub fn base_fields() -> Vec<FieldDescriptor> {
    vec![
        FieldDescriptor::new("id", FieldType::Uuid),
        FieldDescriptor::new("created_at", FieldType::Timestamp),
        FieldDescriptor::new("updated_at", FieldType::Timestamp),
        FieldDescriptor::new("version", FieldType::Integer).with_default(DefaultValue::Integer(1)),
        FieldDescriptor::new("deleted_at", FieldType::Timestamp).nullable(),
    ]
}

/// A projection of events into rows of one table.
///
/// Implement it for a serde type that embeds [`ReadModelMeta`] with
/// `#[serde(flatten)]` and lists its other fields in [`ReadModel::fields`].
/// The repository stores each described field in its own column and
/// rebuilds the model from them with serde; keys of the serde form that are
/// not described are not stored.
///
/// ```
/// use eventsource::ports::readmodels::{FieldDescriptor, FieldType, ReadModel, ReadModelMeta};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, Serialize, Deserialize)]
/// struct OrderSummary {
///     #[serde(flatten)]
///     meta: ReadModelMeta,
///     customer: String,
///     total_cents: i64,
///     note: Option<String>,
/// }
///
/// impl ReadModel for OrderSummary {
///     fn fields() -> Vec<FieldDescriptor> {
///         vec![
///             FieldDescriptor::new("customer", FieldType::Text),
///             FieldDescriptor::new("total_cents", FieldType::Integer),
///             FieldDescriptor::new("note", FieldType::Text).nullable(),
///         ]
///     }
///     fn meta(&self) -> &ReadModelMeta { &self.meta }
///     fn meta_mut(&mut self) -> &mut ReadModelMeta { &mut self.meta }
/// }
///
/// assert_eq!(OrderSummary::table_name(), "order_summaries");
/// ```
pub trait ReadModel: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// An explicit table name; `None` derives it from the type name (see
    /// [`default_table_name`]).
    const TABLE_NAME: Option<&'static str> = None;

    /// The table name: [`ReadModel::TABLE_NAME`], or the type name in
    /// snake_case, pluralised (`OrderSummary` -> `order_summaries`).
    fn table_name() -> String {
        match Self::TABLE_NAME {
            Some(name) => name.to_owned(),
            None => default_table_name(std::any::type_name::<Self>()),
        }
    }

    /// The user fields (every column except the base columns).
    fn fields() -> Vec<FieldDescriptor>;

    /// The declared indexes (the `deleted_at` index is always added).
    fn indexes() -> Vec<IndexDescriptor> {
        Vec::new()
    }

    /// The model's bookkeeping.
    fn meta(&self) -> &ReadModelMeta;

    /// The model's bookkeeping, mutably.
    fn meta_mut(&mut self) -> &mut ReadModelMeta;

    /// The model's id.
    fn id(&self) -> Uuid {
        self.meta().id
    }

    /// The model's version.
    fn version(&self) -> i64 {
        self.meta().version
    }
}

/// Derives a table name from a (possibly path-qualified, possibly generic)
/// Rust type name: the last path segment, in snake_case, pluralised.
///
/// ```
/// use eventsource::ports::readmodels::default_table_name;
/// assert_eq!(default_table_name("my_app::OrderSummary"), "order_summaries");
/// assert_eq!(default_table_name("Category"), "categories");
/// assert_eq!(default_table_name("Address"), "addresses");
/// assert_eq!(default_table_name("HTTPRequest"), "http_requests");
/// ```
pub fn default_table_name(type_name: &str) -> String {
    let base = type_name.split('<').next().unwrap_or(type_name);
    let last = base.rsplit("::").next().unwrap_or(base);
    pluralize(&snake_case(last))
}

/// Converts `CamelCase` to `snake_case`, keeping acronyms together
/// (`HTTPRequest` -> `http_request`).
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                None => false,
                Some('_') => false,
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(|n| n.is_lowercase()),
                Some(_) => false,
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// English plural of a snake_case name's last word: `-y` after a consonant
/// becomes `-ies`; `-s`, `-x`, `-z`, `-ch`, `-sh` take `-es`; else `-s`.
pub fn pluralize(name: &str) -> String {
    let vowel = |c: char| "aeiou".contains(c);
    if let Some(stem) = name.strip_suffix('y') {
        if stem
            .chars()
            .last()
            .is_some_and(|c| c.is_alphabetic() && !vowel(c))
        {
            return format!("{stem}ies");
        }
    }
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|s| name.ends_with(s))
    {
        return format!("{name}es");
    }
    format!("{name}s")
}

/// A model in its stored form: the bookkeeping plus one [`Value`] per user
/// field, in [`ReadModel::fields`] order. What every adapter stores.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The bookkeeping columns.
    pub meta: ReadModelMeta,
    /// One value per user field, in descriptor order.
    pub values: Vec<Value>,
}

impl Record {
    /// Splits `model` into its stored form, checking every value against its
    /// descriptor (type, nullability). Timestamps are truncated to
    /// microseconds.
    ///
    /// Fails with [`ReadModelError::InvalidModel`] when the version is below
    /// 1, a non-nullable field is NULL or missing from the serde form, or a
    /// descriptor reuses a base column's name; with
    /// [`ReadModelError::Serialization`] when serde fails or a value does not
    /// fit its field type.
    pub fn from_model<M: ReadModel>(
        model: &M,
        fields: &[FieldDescriptor],
    ) -> Result<Self, ReadModelError> {
        let json = serde_json::to_value(model).map_err(|e| ser_err::<M>(e.to_string()))?;
        let serde_json::Value::Object(map) = json else {
            return Err(ser_err::<M>(
                "the model must serialise as a JSON object".into(),
            ));
        };
        let mut values = Vec::with_capacity(fields.len());
        for field in fields {
            if BASE_COLUMNS.contains(&field.name.as_str()) {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: field {:?} collides with a base column",
                    short_type_name::<M>(),
                    field.name
                )));
            }
            let raw = match map.get(&field.name) {
                Some(raw) => raw,
                None if field.nullable => &serde_json::Value::Null,
                None => {
                    return Err(ReadModelError::InvalidModel(format!(
                        "{}: described field {:?} is missing from the serde form",
                        short_type_name::<M>(),
                        field.name
                    )))
                }
            };
            let value = Value::from_json(raw, &field.field_type)
                .map_err(|reason| ser_err::<M>(format!("field {:?}: {reason}", field.name)))?;
            if value.is_null() && !field.nullable {
                return Err(ReadModelError::InvalidModel(format!(
                    "{}: field {:?} is NULL but not nullable",
                    short_type_name::<M>(),
                    field.name
                )));
            }
            values.push(value);
        }
        let mut meta = model.meta().clone();
        if meta.version < 1 {
            return Err(ReadModelError::InvalidModel(format!(
                "{} {}: version {} is below 1",
                short_type_name::<M>(),
                meta.id,
                meta.version
            )));
        }
        meta.created_at = meta.created_at.trunc_subsecs(6);
        meta.updated_at = meta.updated_at.trunc_subsecs(6);
        meta.deleted_at = meta.deleted_at.map(|t| t.trunc_subsecs(6));
        Ok(Self { meta, values })
    }

    /// Rebuilds a model from its stored form.
    pub fn to_model<M: ReadModel>(&self, fields: &[FieldDescriptor]) -> Result<M, ReadModelError> {
        let mut map = match serde_json::to_value(&self.meta) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => return Err(ser_err::<M>("cannot serialise the base columns".into())),
        };
        for (field, value) in fields.iter().zip(&self.values) {
            map.insert(field.name.clone(), value.to_json());
        }
        let mut model: M = serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| ser_err::<M>(e.to_string()))?;
        *model.meta_mut() = self.meta.clone();
        Ok(model)
    }

    /// The value of the column `name`: a base column or a user field.
    pub fn column(&self, name: &str, fields: &[FieldDescriptor]) -> Option<Value> {
        match name {
            "id" => Some(Value::Uuid(self.meta.id)),
            "created_at" => Some(Value::Timestamp(self.meta.created_at)),
            "updated_at" => Some(Value::Timestamp(self.meta.updated_at)),
            "version" => Some(Value::Integer(self.meta.version)),
            "deleted_at" => Some(self.meta.deleted_at.map_or(Value::Null, Value::Timestamp)),
            _ => fields
                .iter()
                .position(|f| f.name == name)
                .map(|i| self.values[i].clone()),
        }
    }
}

fn ser_err<M>(reason: String) -> ReadModelError {
    ReadModelError::Serialization(format!("{}: {reason}", short_type_name::<M>()))
}

fn short_type_name<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// Parses a `YYYY-MM-DD` date. For adapters.
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Thing {
        #[serde(flatten)]
        meta: ReadModelMeta,
        label: String,
    }

    impl ReadModel for Thing {
        fn fields() -> Vec<FieldDescriptor> {
            vec![FieldDescriptor::of::<String>("label")]
        }
        fn meta(&self) -> &ReadModelMeta {
            &self.meta
        }
        fn meta_mut(&mut self) -> &mut ReadModelMeta {
            &mut self.meta
        }
    }

    #[test]
    fn records_check_models_against_their_descriptors() {
        let thing = Thing {
            meta: ReadModelMeta::new_random(),
            label: "x".into(),
        };
        let record = Record::from_model(&thing, &Thing::fields()).unwrap();
        assert_eq!(record.values, vec![Value::Text("x".into())]);
        let back: Thing = record.to_model(&Thing::fields()).unwrap();
        assert_eq!(
            (back.meta, back.label),
            (thing.meta.clone(), thing.label.clone())
        );

        let invalid = |fields: Vec<FieldDescriptor>| {
            matches!(
                Record::from_model(&thing, &fields),
                Err(ReadModelError::InvalidModel(_))
            )
        };
        assert!(invalid(vec![FieldDescriptor::of::<String>("missing")]));
        assert!(invalid(vec![FieldDescriptor::of::<i64>("version")]));
        assert!(
            Record::from_model(&thing, &[FieldDescriptor::of::<Option<String>>("missing")]).is_ok()
        );
        assert!(matches!(
            Record::from_model(&thing, &[FieldDescriptor::of::<i64>("label")]),
            Err(ReadModelError::Serialization(_))
        ));
    }

    #[test]
    fn table_names_are_snake_case_plurals() {
        for (ty, table) in [
            ("OrderSummary", "order_summaries"),
            ("Category", "categories"),
            ("app::read::Key", "keys"),
            ("Box", "boxes"),
            ("Status", "statuses"),
            ("Branch", "branches"),
            ("Wish", "wishes"),
            ("HTTPRequest", "http_requests"),
            ("Order2Item", "order2_items"),
            ("Wrapper<u8>", "wrappers"),
            ("Day", "days"),
        ] {
            assert_eq!(default_table_name(ty), table, "{ty}");
        }
    }
}
