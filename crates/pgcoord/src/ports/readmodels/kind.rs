//! [`FieldKind`]: the Rust types a read-model field can have, with their
//! [`FieldType`] and their conversion to and from a stored [`Value`].

use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

use super::field_type::FieldType;
use super::value::Value;

/// Rust types with a natural [`FieldType`], for [`FieldDescriptor::of`](super::FieldDescriptor::of)
/// and `#[derive(ReadModel)]`.
///
/// Implemented for `String`, `i64`, `i32`, `i16`, `i8`, `u32`, `u16`, `u8`,
/// `f64`, `f32`, `bool`, [`Uuid`], `DateTime<Utc>`, `NaiveDate`,
/// `serde_json::Value`, `Vec<u8>`, and `Option` of any of them (nullable).
/// These convert to and from a [`Value`] directly; for your own types
/// (a unit-variant enum as `FieldType::Other("Status".into())`, a decimal
/// type as `FieldType::Decimal`) implement [`field_type`](FieldKind::field_type)
/// and keep the provided conversions, which go through the type's serde form.
///
/// ```
/// use pgcoord::readmodels::{FieldKind, FieldType, Value};
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// enum Status { Open, Closed }
/// impl FieldKind for Status {
///     fn field_type() -> FieldType { FieldType::Other("Status".into()) }
/// }
/// assert_eq!(Status::Open.to_value(), Ok(Value::Text("Open".into())));
/// assert_eq!(Status::from_value(Value::Text("Closed".into())), Ok(Status::Closed));
/// assert_eq!(Some(7_i64).to_value(), Ok(Value::Integer(7)));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no read-model column type",
    label = "this field's type does not implement `FieldKind`",
    note = "store it through its serde form with `#[column(kind = \"...\")]`: `kind = \"json\"` for a structure, `kind = \"text\"` (or `sql_type = \"TEXT\"`) for a type that serialises as a string such as a unit-variant enum, `kind = \"decimal\"` for a number (`u64` and `usize` do not fit `integer`, a signed 64-bit column); or implement `pgcoord::readmodels::FieldKind` for `{Self}`"
)]
pub trait FieldKind {
    /// The field type.
    fn field_type() -> FieldType;

    /// True when the column accepts NULL.
    fn nullable() -> bool {
        false
    }

    /// The stored value of `self`. Default: through the serde form.
    fn to_value(&self) -> Result<Value, String>
    where
        Self: Serialize,
    {
        let json = serde_json::to_value(self).map_err(|e| e.to_string())?;
        Value::from_json(&json, &Self::field_type())
    }

    /// Rebuilds a value from its stored form. Default: through the serde
    /// form.
    fn from_value(value: Value) -> Result<Self, String>
    where
        Self: DeserializeOwned + Sized,
    {
        serde_json::from_value(value.to_json()).map_err(|e| e.to_string())
    }
}

fn unexpected(want: &str, got: &Value) -> String {
    match got {
        Value::Null => format!("expected {want}, got NULL"),
        other => format!("expected {want}, got {other:?}"),
    }
}

macro_rules! integer_kind {
    ($($t:ty),*) => {$(
        impl FieldKind for $t {
            fn field_type() -> FieldType {
                FieldType::Integer
            }
            fn to_value(&self) -> Result<Value, String> {
                Ok(Value::Integer(i64::from(*self)))
            }
            fn from_value(value: Value) -> Result<Self, String> {
                match value {
                    Value::Integer(i) => <$t>::try_from(i)
                        .map_err(|_| format!("{i} does not fit {}", stringify!($t))),
                    other => Err(unexpected("an integer", &other)),
                }
            }
        }
    )*};
}

integer_kind!(i64, i32, i16, i8, u32, u16, u8);

macro_rules! simple_kind {
    ($($t:ty => $ft:ident, $variant:ident, $want:literal);* $(;)?) => {$(
        impl FieldKind for $t {
            fn field_type() -> FieldType {
                FieldType::$ft
            }
            fn to_value(&self) -> Result<Value, String> {
                Ok(Value::$variant(self.clone()))
            }
            fn from_value(value: Value) -> Result<Self, String> {
                match value {
                    Value::$variant(v) => Ok(v),
                    other => Err(unexpected($want, &other)),
                }
            }
        }
    )*};
}

simple_kind! {
    bool => Bool, Bool, "a bool";
    Uuid => Uuid, Uuid, "a UUID";
    NaiveDate => Date, Date, "a date";
    Vec<u8> => Bytes, Bytes, "bytes";
}

impl FieldKind for String {
    fn field_type() -> FieldType {
        FieldType::Text
    }
    fn to_value(&self) -> Result<Value, String> {
        Ok(Value::Text(self.clone()))
    }
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Text(s) | Value::Decimal(s) => Ok(s),
            other => Err(unexpected("text", &other)),
        }
    }
}

impl FieldKind for f64 {
    fn field_type() -> FieldType {
        FieldType::Float
    }
    fn to_value(&self) -> Result<Value, String> {
        Ok(Value::Float(*self))
    }
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Float(f) => Ok(f),
            Value::Integer(i) => Ok(i as f64),
            other => Err(unexpected("a number", &other)),
        }
    }
}

impl FieldKind for f32 {
    fn field_type() -> FieldType {
        FieldType::Float
    }
    fn to_value(&self) -> Result<Value, String> {
        Ok(Value::Float(f64::from(*self)))
    }
    fn from_value(value: Value) -> Result<Self, String> {
        f64::from_value(value).map(|f| f as f32)
    }
}

impl FieldKind for DateTime<Utc> {
    fn field_type() -> FieldType {
        FieldType::Timestamp
    }
    fn to_value(&self) -> Result<Value, String> {
        Ok(Value::Timestamp(self.trunc_subsecs(6)))
    }
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Timestamp(t) => Ok(t),
            other => Err(unexpected("a timestamp", &other)),
        }
    }
}

impl FieldKind for serde_json::Value {
    fn field_type() -> FieldType {
        FieldType::Json
    }
    fn to_value(&self) -> Result<Value, String> {
        Ok(match self {
            serde_json::Value::Null => Value::Null,
            json => Value::Json(json.clone()),
        })
    }
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Json(j) => Ok(j),
            Value::Null => Ok(serde_json::Value::Null),
            other => Err(unexpected("JSON", &other)),
        }
    }
}

impl<T: FieldKind + Serialize + DeserializeOwned> FieldKind for Option<T> {
    fn field_type() -> FieldType {
        T::field_type()
    }
    fn nullable() -> bool {
        true
    }
    fn to_value(&self) -> Result<Value, String> {
        match self {
            None => Ok(Value::Null),
            Some(v) => v.to_value(),
        }
    }
    fn from_value(value: Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_round_trip_and_refuse_what_does_not_fit() {
        assert_eq!(
            i8::from_value(Value::Integer(300)).unwrap_err(),
            "300 does not fit i8"
        );
        assert_eq!(u8::from_value(Value::Integer(7)), Ok(7));
        assert!(String::from_value(Value::Null).is_err());
        assert_eq!(Option::<String>::from_value(Value::Null), Ok(None));
        let t = Utc::now();
        let Value::Timestamp(stored) = t.to_value().unwrap() else {
            panic!("not a timestamp")
        };
        assert_eq!(stored, t.trunc_subsecs(6));
        assert_eq!(f64::from_value(Value::Integer(2)), Ok(2.0));
        assert_eq!(<Option<i64> as FieldKind>::field_type(), FieldType::Integer);
        assert!(<Option<i64> as FieldKind>::nullable());
    }
}
