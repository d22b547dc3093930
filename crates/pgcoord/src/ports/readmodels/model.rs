//! The [`ReadModel`] trait.

use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

use super::error::ReadModelError;
use super::field::FieldDescriptor;
use super::index::IndexDescriptor;
use super::meta::ReadModelMeta;
use super::naming::default_table_name;
use super::serde_form;
use super::value::Value;

/// A projection of events into rows of one table.
///
/// Derive it (`#[derive(ReadModel)]`, feature `derive`, on by default):
///
/// ```
/// use pgcoord::readmodels::{Filter, ReadModel, ReadModelMeta};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
/// #[read_model(index(customer))]
/// struct OrderSummary {
///     #[serde(flatten)]
///     #[read_model(meta)]
///     meta: ReadModelMeta,
///     customer: String,
///     total_cents: i64,
///     note: Option<String>,
/// }
///
/// assert_eq!(OrderSummary::table_name(), "order_summaries");
/// assert_eq!(OrderSummary::fields().len(), 3);
/// assert!(OrderSummary::fields()[2].nullable);
/// let _ = Filter::eq(OrderSummary::CUSTOMER, "ada"); // a typo is a compile error
/// ```
///
/// or implement it by hand for a serde type that embeds [`ReadModelMeta`]
/// with `#[serde(flatten)]` and lists its other fields in
/// [`ReadModel::fields`]. The repository stores each described field in its
/// own column; a hand-written impl converts through the serde form, where
/// keys that are not described are not stored.
///
/// ```
/// use pgcoord::readmodels::{FieldDescriptor, FieldType, ReadModel, ReadModelMeta};
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
///     const TABLE_NAME: Option<&'static str> = Some("order_summaries");
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
    /// An explicit table name. The derive always sets it (from
    /// `#[read_model(table = "...")]` or the identifier); `None` derives it
    /// at run time from `std::any::type_name` (see [`default_table_name`]).
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

    /// The stored values of the user fields, one per descriptor of
    /// `fields` (which is [`ReadModel::fields`]), in that order.
    ///
    /// Default: through the serde form (a described field missing from it
    /// is NULL when nullable, an error otherwise). The derive generates a
    /// direct conversion.
    fn to_values(&self, fields: &[FieldDescriptor]) -> Result<Vec<Value>, ReadModelError> {
        serde_form::values_via_serde(self, fields)
    }

    /// Rebuilds a model from its bookkeeping and the stored values of
    /// `fields`. Default: through the serde form; the derive generates a
    /// direct conversion.
    fn from_values(
        meta: ReadModelMeta,
        values: Vec<Value>,
        fields: &[FieldDescriptor],
    ) -> Result<Self, ReadModelError> {
        serde_form::model_via_serde(meta, values, fields, Self::meta_mut)
    }
}
