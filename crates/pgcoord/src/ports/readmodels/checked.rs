//! The checked form of a query ([`CheckedQuery`] and its parts): what
//! [`Query::check`](super::Query::check) returns and adapters translate.

use std::cmp::Ordering;

use super::field::FieldDescriptor;
use super::field_type::FieldType;
use super::terms::{Direction, Operand, Operator};
use super::value::Value;

/// Which rows a checked query sees with respect to soft deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletedRows {
    /// Live rows only.
    Exclude,
    /// Live and soft-deleted rows.
    Include,
    /// Soft-deleted rows only (`find_deleted`).
    Only,
}

impl DeletedRows {
    /// True when a row with this `deleted_at` state is visible.
    pub fn admits(self, deleted: bool) -> bool {
        match self {
            DeletedRows::Exclude => !deleted,
            DeletedRows::Include => true,
            DeletedRows::Only => deleted,
        }
    }
}

/// A filter whose field exists and whose operand has the field's type.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedFilter {
    /// The column.
    pub column: String,
    /// The column's type.
    pub field_type: FieldType,
    /// The operator.
    pub operator: Operator,
    /// The operand, converted to the field's type (never NULL).
    pub operand: Operand,
}

impl CheckedFilter {
    /// The reference semantics: does a row whose column holds `value` match?
    pub fn matches(&self, value: &Value) -> bool {
        let cmp = |v: &Value| value.compare(v);
        match (&self.operand, self.operator) {
            (Operand::One(v), Operator::Eq) => cmp(v) == Some(Ordering::Equal),
            (Operand::One(v), Operator::Ne) => value.is_null() || cmp(v) != Some(Ordering::Equal),
            (Operand::One(v), Operator::Gt) => cmp(v) == Some(Ordering::Greater),
            (Operand::One(v), Operator::Gte) => {
                matches!(cmp(v), Some(Ordering::Greater | Ordering::Equal))
            }
            (Operand::One(v), Operator::Lt) => cmp(v) == Some(Ordering::Less),
            (Operand::One(v), Operator::Lte) => {
                matches!(cmp(v), Some(Ordering::Less | Ordering::Equal))
            }
            (Operand::Many(vs), Operator::In) => vs.iter().any(|v| cmp(v) == Some(Ordering::Equal)),
            (Operand::Many(vs), Operator::NotIn) => {
                value.is_null() || vs.iter().all(|v| cmp(v) != Some(Ordering::Equal))
            }
            _ => false,
        }
    }
}

/// A checked order key.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedOrder {
    /// The column.
    pub column: String,
    /// The column's type.
    pub field_type: FieldType,
    /// The direction.
    pub direction: Direction,
}

impl CheckedOrder {
    /// The reference ordering of two column values: NULLs last ascending,
    /// first descending (NULL is the largest value).
    pub fn compare(&self, a: &Value, b: &Value) -> Ordering {
        let ord = match (a.is_null(), b.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => a.compare(b).unwrap_or(Ordering::Equal),
        };
        match self.direction {
            Direction::Asc => ord,
            Direction::Desc => ord.reverse(),
        }
    }
}

/// A query that passed [`Query::check`](super::Query::check): what adapters translate.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedQuery {
    /// The filters (AND).
    pub filters: Vec<CheckedFilter>,
    /// The order key; ties and unordered queries are ordered by `id`.
    pub order: Option<CheckedOrder>,
    /// The maximum number of rows.
    pub limit: Option<u64>,
    /// The rows skipped.
    pub offset: u64,
    /// Soft-deleted rows policy.
    pub deleted: DeletedRows,
}

/// Why [`Query::check`](super::Query::check) refused the name `name`: names
/// are column names (a renamed field's `#[column(rename = "...")]`, not
/// its Rust name), so the message lists the model's columns.
pub(super) fn unknown_field(name: &str, fields: &[FieldDescriptor]) -> String {
    let base = r#"the base columns "id", "created_at", "updated_at", "version", "deleted_at""#;
    let columns: Vec<String> = fields.iter().map(|f| format!("{:?}", f.name)).collect();
    let known = if columns.is_empty() {
        format!("this model has only {base}")
    } else {
        format!("this model's are {} and {base}", columns.join(", "))
    };
    format!(
        "unknown field {name:?}: queries name columns, not Rust fields (a renamed field \
         by its `rename`, as its constant `Model::FIELD` does); {known}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_name_is_answered_with_the_column_names() {
        let fields = [
            FieldDescriptor::new("name", FieldType::Text),
            FieldDescriptor::new("nick_name", FieldType::Text),
        ];
        assert_eq!(
            unknown_field("nick", &fields),
            r#"unknown field "nick": queries name columns, not Rust fields (a renamed field by its `rename`, as its constant `Model::FIELD` does); this model's are "name", "nick_name" and the base columns "id", "created_at", "updated_at", "version", "deleted_at""#
        );
        assert!(unknown_field("x", &[]).contains(r#"this model has only the base columns "id""#));
    }
}
