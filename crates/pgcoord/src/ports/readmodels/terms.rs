//! The words of a query: [`Operator`], [`Operand`] and [`Direction`],
//! shared by [`Query`](super::Query) and its checked form.

use std::fmt;
use std::str::FromStr;

use super::error::ReadModelError;
use super::value::Value;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `=`
    Eq,
    /// `<>` (NULL fields match)
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Gte,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// Membership in a list (an empty list matches nothing).
    In,
    /// Non-membership in a list (NULL fields match; an empty list matches
    /// everything).
    NotIn,
}

impl Operator {
    /// Every operator.
    pub const ALL: [Operator; 8] = [
        Operator::Eq,
        Operator::Ne,
        Operator::Gt,
        Operator::Gte,
        Operator::Lt,
        Operator::Lte,
        Operator::In,
        Operator::NotIn,
    ];

    /// The operator's name: `eq`, `ne`, `gt`, `gte`, `lt`, `lte`, `in`, `not_in`.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Eq => "eq",
            Operator::Ne => "ne",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::In => "in",
            Operator::NotIn => "not_in",
        }
    }

    /// True for `in` and `not_in`, which take a list.
    pub fn takes_list(self) -> bool {
        matches!(self, Operator::In | Operator::NotIn)
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Operator {
    type Err = ReadModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operator::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| ReadModelError::InvalidQuery(format!("unknown operator {s:?}")))
    }
}

/// The right-hand side of a filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// One value, for the comparison operators.
    One(Value),
    /// A list, for `in` and `not_in`.
    Many(Vec<Value>),
}
/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// Smallest first; NULLs last.
    #[default]
    Asc,
    /// Largest first; NULLs first.
    Desc,
}

impl FromStr for Direction {
    type Err = ReadModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "asc" => Ok(Direction::Asc),
            "desc" => Ok(Direction::Desc),
            _ => Err(ReadModelError::InvalidQuery(format!(
                "unknown sort direction {s:?}"
            ))),
        }
    }
}
