//! [`Query`] and [`Filter`]: the query language every repository speaks.
//!
//! # Semantics (the same on every backend)
//!
//! - Filters are combined with AND.
//! - A NULL field never matches `eq`, `in`, `gt`, `gte`, `lt`, `lte`, and
//!   always matches `ne` and `not_in`.
//! - An empty `in` list matches nothing; an empty `not_in` list matches
//!   everything.
//! - Text compares byte-wise (the `C` collation), whatever the database's
//!   default collation.
//! - One order key; NULLs sort last ascending and first descending; ties
//!   (and queries without an order key) are broken by `id` ascending, so
//!   `limit`/`offset` pages are stable.
//! - Soft-deleted rows are left out unless `include_deleted` is set.
//! - A filter or order key naming an unknown field, an unknown operator, an
//!   operand of the wrong type, or a JSON/bytes field is rejected with
//!   [`ReadModelError::InvalidQuery`] before any SQL runs.

use super::error::ReadModelError;
use super::field::FieldDescriptor;
use super::field_type::FieldType;
use super::storage::base_fields;
use super::value::Value;

use super::checked::{CheckedFilter, CheckedOrder, CheckedQuery, DeletedRows};
use super::terms::{Direction, Operand, Operator};

/// One condition on one field.
///
/// ```
/// use pgcoord::readmodels::Filter;
/// let open = Filter::eq("status", "open");
/// let big = Filter::gte("total_cents", 10_000);
/// let some = Filter::is_in("region", ["eu", "us"]);
/// let parsed = Filter::parse("status", "ne", "closed").unwrap();
/// assert!(Filter::parse("status", "like", "o%").is_err());
/// # let _ = (open, big, some, parsed);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The field (column) name.
    pub field: String,
    /// The operator.
    pub operator: Operator,
    /// The operand.
    pub operand: Operand,
}

impl Filter {
    fn one(field: impl Into<String>, operator: Operator, value: impl Into<Value>) -> Self {
        Self {
            field: field.into(),
            operator,
            operand: Operand::One(value.into()),
        }
    }

    fn many<I, V>(field: impl Into<String>, operator: Operator, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        Self {
            field: field.into(),
            operator,
            operand: Operand::Many(values.into_iter().map(Into::into).collect()),
        }
    }

    /// `field = value`.
    pub fn eq(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::one(field, Operator::Eq, value)
    }

    /// `field <> value`, or `field` is NULL.
    pub fn ne(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::one(field, Operator::Ne, value)
    }

    /// `field > value`.
    pub fn gt(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::one(field, Operator::Gt, value)
    }

    /// `field >= value`.
    pub fn gte(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::one(field, Operator::Gte, value)
    }

    /// `field < value`.
    pub fn lt(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::one(field, Operator::Lt, value)
    }

    /// `field <= value`.
    pub fn lte(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::one(field, Operator::Lte, value)
    }

    /// `field IN (values)`; an empty list matches nothing.
    pub fn is_in<I, V>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        Self::many(field, Operator::In, values)
    }

    /// `field NOT IN (values)`, or `field` is NULL; an empty list matches
    /// everything.
    pub fn not_in<I, V>(field: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<Value>,
    {
        Self::many(field, Operator::NotIn, values)
    }

    /// A filter from an operator name (e.g. from a request's query string).
    /// For `in`/`not_in` a JSON array value is taken as the list.
    ///
    /// Fails with [`ReadModelError::InvalidQuery`] on an unknown operator.
    pub fn parse(
        field: impl Into<String>,
        operator: &str,
        value: impl Into<Value>,
    ) -> Result<Self, ReadModelError> {
        let operator: Operator = operator.parse()?;
        let value = value.into();
        let operand = match (operator.takes_list(), value) {
            (true, Value::Json(serde_json::Value::Array(items))) => Operand::Many(
                items
                    .into_iter()
                    .map(|j| match j {
                        serde_json::Value::String(s) => Value::Text(s),
                        serde_json::Value::Bool(b) => Value::Bool(b),
                        serde_json::Value::Number(n) => n
                            .as_i64()
                            .map(Value::Integer)
                            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(f64::NAN))),
                        other => Value::Json(other),
                    })
                    .collect(),
            ),
            (_, value) => Operand::One(value),
        };
        Ok(Self {
            field: field.into(),
            operator,
            operand,
        })
    }
}

/// A query: filters (AND), one order key, limit, offset, and whether
/// soft-deleted rows are included. See the
/// [query semantics](crate::readmodels#query-semantics) for the
/// semantics.
///
/// ```
/// use pgcoord::readmodels::{Direction, Filter, Query};
/// let q = Query::new()
///     .filter(Filter::eq("status", "open"))
///     .filter(Filter::gt("total_cents", 1_000))
///     .order_by("created_at", Direction::Desc)
///     .limit(20)
///     .offset(40);
/// assert_eq!(q.filters.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Query {
    /// The filters, combined with AND.
    pub filters: Vec<Filter>,
    /// The order key and direction.
    pub order_by: Option<(String, Direction)>,
    /// The maximum number of rows.
    pub limit: Option<u64>,
    /// The number of rows skipped.
    pub offset: u64,
    /// Include soft-deleted rows.
    pub include_deleted: bool,
}

impl Query {
    /// A query matching every live row.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a filter (AND).
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filters.push(filter);
        self
    }

    /// Sets the order key.
    pub fn order_by(mut self, field: impl Into<String>, direction: Direction) -> Self {
        self.order_by = Some((field.into(), direction));
        self
    }

    /// Sets the limit.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the offset.
    pub fn offset(mut self, offset: u64) -> Self {
        self.offset = offset;
        self
    }

    /// Includes (or not) soft-deleted rows.
    pub fn include_deleted(mut self, include: bool) -> Self {
        self.include_deleted = include;
        self
    }

    /// Checks the query against a model's fields (base columns included)
    /// and converts every operand to its field's type.
    ///
    /// Every repository calls this first, so that a bad query fails the same
    /// way everywhere and before any SQL is built.
    pub fn check(&self, fields: &[FieldDescriptor]) -> Result<CheckedQuery, ReadModelError> {
        let bad = |msg: String| ReadModelError::InvalidQuery(msg);
        let base = base_fields();
        let lookup = |name: &str| -> Result<FieldType, ReadModelError> {
            base.iter()
                .chain(fields)
                .find(|f| f.name == name)
                .map(|f| f.field_type.clone())
                .ok_or_else(|| bad(super::checked::unknown_field(name, fields)))
        };
        let mut filters = Vec::with_capacity(self.filters.len());
        for filter in &self.filters {
            let field_type = lookup(&filter.field)?;
            if !field_type.is_queryable() {
                return Err(bad(format!(
                    "field {:?} is of type {field_type} and cannot be filtered",
                    filter.field
                )));
            }
            let coerce = |v: &Value| {
                v.coerce_to(&field_type).map_err(|e| {
                    bad(format!(
                        "filter {} on {:?}: {e}",
                        filter.operator, filter.field
                    ))
                })
            };
            let operand = match (&filter.operand, filter.operator.takes_list()) {
                (Operand::One(v), false) => Operand::One(coerce(v)?),
                (Operand::Many(vs), true) => {
                    Operand::Many(vs.iter().map(coerce).collect::<Result<_, _>>()?)
                }
                (_, true) => {
                    return Err(bad(format!(
                        "operator {} on {:?} takes a list",
                        filter.operator, filter.field
                    )))
                }
                (_, false) => {
                    return Err(bad(format!(
                        "operator {} on {:?} takes a single value",
                        filter.operator, filter.field
                    )))
                }
            };
            filters.push(CheckedFilter {
                column: filter.field.clone(),
                field_type,
                operator: filter.operator,
                operand,
            });
        }
        let order = match &self.order_by {
            None => None,
            Some((field, direction)) => {
                let field_type = lookup(field)?;
                if !field_type.is_queryable() {
                    return Err(bad(format!(
                        "field {field:?} is of type {field_type} and cannot be ordered by"
                    )));
                }
                Some(CheckedOrder {
                    column: field.clone(),
                    field_type,
                    direction: *direction,
                })
            }
        };
        Ok(CheckedQuery {
            filters,
            order,
            limit: self.limit,
            offset: self.offset,
            deleted: if self.include_deleted {
                DeletedRows::Include
            } else {
                DeletedRows::Exclude
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("name", FieldType::Text),
            FieldDescriptor::new("score", FieldType::Float).nullable(),
            FieldDescriptor::new("blob", FieldType::Json),
        ]
    }

    #[test]
    fn unknown_field_operator_and_order_are_rejected() {
        let f = fields();
        assert!(Query::new()
            .filter(Filter::eq("nope", 1))
            .check(&f)
            .is_err());
        assert!(Query::new()
            .order_by("nope", Direction::Asc)
            .check(&f)
            .is_err());
        assert!(matches!(
            Filter::parse("name", "like", "x"),
            Err(ReadModelError::InvalidQuery(_))
        ));
        assert!(Query::new()
            .filter(Filter::eq("blob", "x"))
            .check(&f)
            .is_err());
        assert!(Query::new()
            .filter(Filter::eq("name", 3))
            .check(&f)
            .is_err());
        let ok = Query::new()
            .filter(Filter::gt("score", 2))
            .filter(Filter::eq("version", 1))
            .check(&f)
            .unwrap();
        assert_eq!(ok.filters[0].operand, Operand::One(Value::Float(2.0)));
    }

    #[test]
    fn null_semantics_of_the_reference_matcher() {
        let f = |op, operand| CheckedFilter {
            column: "x".into(),
            field_type: FieldType::Integer,
            operator: op,
            operand,
        };
        let one = Operand::One(Value::Integer(1));
        for op in [
            Operator::Eq,
            Operator::Gt,
            Operator::Gte,
            Operator::Lt,
            Operator::Lte,
        ] {
            assert!(!f(op, one.clone()).matches(&Value::Null), "{op}");
        }
        assert!(f(Operator::Ne, one).matches(&Value::Null));
        assert!(!f(Operator::In, Operand::Many(vec![Value::Integer(1)])).matches(&Value::Null));
        assert!(f(Operator::NotIn, Operand::Many(vec![Value::Integer(1)])).matches(&Value::Null));
        assert!(!f(Operator::In, Operand::Many(vec![])).matches(&Value::Integer(1)));
        assert!(f(Operator::NotIn, Operand::Many(vec![])).matches(&Value::Integer(1)));
    }
}
