//! [`Value`]: one typed column value, as filters carry them and adapters
//! store them.

use std::cmp::Ordering;

use chrono::{DateTime, NaiveDate, SubsecRound, Utc};
use uuid::Uuid;

use super::bounds;
use super::field_type::FieldType;

/// One column value. Filters take values through `From` impls
/// (`"open".into()`, `42.into()`, `uuid.into()`, ...); the query validator
/// converts them to the field's type before any backend sees them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// SQL NULL / `None`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit integer.
    Integer(i64),
    /// A 64-bit float.
    Float(f64),
    /// A decimal number, as its decimal text (e.g. `"12.50"`).
    Decimal(String),
    /// A string.
    Text(String),
    /// A UUID.
    Uuid(Uuid),
    /// An instant in UTC.
    Timestamp(DateTime<Utc>),
    /// A calendar date.
    Date(NaiveDate),
    /// A JSON document.
    Json(serde_json::Value),
    /// A byte string.
    Bytes(Vec<u8>),
}

impl Value {
    /// True for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a model's serde value to the value of a field of type `ty`.
    pub fn from_json(json: &serde_json::Value, ty: &FieldType) -> Result<Value, String> {
        use serde_json::Value as J;
        if json.is_null() {
            return Ok(Value::Null);
        }
        let wrong = || format!("expected {ty}, got {json}");
        Ok(match ty {
            FieldType::Json => Value::Json(json.clone()),
            FieldType::Text | FieldType::Other(_) => match json {
                J::String(s) => Value::Text(s.clone()),
                _ => return Err(wrong()),
            },
            FieldType::Uuid => match json {
                J::String(s) => Value::Uuid(Uuid::parse_str(s).map_err(|_| wrong())?),
                _ => return Err(wrong()),
            },
            FieldType::Integer => Value::Integer(json.as_i64().ok_or_else(wrong)?),
            FieldType::Float => Value::Float(json.as_f64().ok_or_else(wrong)?),
            FieldType::Decimal => match json {
                J::String(s) => Value::Decimal(normalize_decimal(s).ok_or_else(wrong)?),
                J::Number(n) => {
                    Value::Decimal(normalize_decimal(&n.to_string()).ok_or_else(wrong)?)
                }
                _ => return Err(wrong()),
            },
            FieldType::Bool => Value::Bool(json.as_bool().ok_or_else(wrong)?),
            FieldType::Timestamp => match json {
                J::String(s) => Value::Timestamp(parse_timestamp(s).ok_or_else(wrong)?),
                _ => return Err(wrong()),
            },
            FieldType::Date => match json {
                J::String(s) => Value::Date(parse_date(s).ok_or_else(wrong)?),
                _ => return Err(wrong()),
            },
            FieldType::Bytes => match json {
                J::Array(items) => Value::Bytes(
                    items
                        .iter()
                        .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                        .collect::<Option<Vec<u8>>>()
                        .ok_or_else(wrong)?,
                ),
                J::String(s) => Value::Bytes(s.as_bytes().to_vec()),
                _ => return Err(wrong()),
            },
        })
    }

    /// The serde form of the value, as the model deserialises it.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Integer(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Decimal(s) | Value::Text(s) => J::String(s.clone()),
            Value::Uuid(u) => J::String(u.to_string()),
            Value::Timestamp(t) => serde_json::to_value(t).unwrap_or(J::Null),
            Value::Date(d) => J::String(d.format("%Y-%m-%d").to_string()),
            Value::Json(j) => j.clone(),
            Value::Bytes(b) => J::Array(b.iter().map(|&x| J::from(x)).collect()),
        }
    }

    /// Converts a filter value to the type of a field, or says why it cannot.
    ///
    /// Integers widen to floats and decimals; strings parse as UUIDs,
    /// timestamps (RFC 3339), dates and decimals. NaN, and a timestamp or
    /// date outside years 0000–9999, are refused (no backend can store
    /// them alike). NULL is refused: a NULL field never equals anything,
    /// so a NULL operand is always a mistake.
    pub fn coerce_to(&self, ty: &FieldType) -> Result<Value, String> {
        let wrong = || {
            let (kind, ty) = (self.kind(), ty.to_string());
            format!(
                "{} {kind} value does not fit {} {ty} field",
                article(kind),
                article(&ty)
            )
        };
        let value = match (ty, self) {
            (_, Value::Null) => return Err("NULL is not a valid filter value".into()),
            (FieldType::Text | FieldType::Other(_), Value::Text(s)) if s.contains('\0') => {
                // PostgreSQL refuses the operand; no backend stores such text.
                return Err(format!("{s:?} holds a NUL character (U+0000)"));
            }
            (FieldType::Text | FieldType::Other(_), Value::Text(s)) => Value::Text(s.clone()),
            (FieldType::Uuid, Value::Uuid(u)) => Value::Uuid(*u),
            (FieldType::Uuid, Value::Text(s)) => {
                Value::Uuid(Uuid::parse_str(s).map_err(|_| format!("{s:?} is not a UUID"))?)
            }
            (FieldType::Integer, Value::Integer(i)) => Value::Integer(*i),
            (FieldType::Float, Value::Float(f)) if f.is_nan() => {
                return Err("NaN is not a valid float operand (no backend stores NaN)".into())
            }
            (FieldType::Float, Value::Float(f)) => Value::Float(*f),
            (FieldType::Float, Value::Integer(i)) => Value::Float(*i as f64),
            (FieldType::Decimal, Value::Decimal(s) | Value::Text(s)) => Value::Decimal(
                normalize_decimal(s).ok_or_else(|| format!("{s:?} is not a decimal"))?,
            ),
            (FieldType::Decimal, Value::Integer(i)) => Value::Decimal(i.to_string()),
            (FieldType::Bool, Value::Bool(b)) => Value::Bool(*b),
            (FieldType::Timestamp, Value::Timestamp(t)) => Value::Timestamp(t.trunc_subsecs(6)),
            (FieldType::Timestamp, Value::Text(s)) => Value::Timestamp(
                parse_timestamp(s).ok_or_else(|| format!("{s:?} is not an RFC 3339 timestamp"))?,
            ),
            (FieldType::Date, Value::Date(d)) => Value::Date(*d),
            (FieldType::Date, Value::Text(s)) => {
                Value::Date(parse_date(s).ok_or_else(|| format!("{s:?} is not a YYYY-MM-DD date"))?)
            }
            _ => return Err(wrong()),
        };
        match value.unsupported() {
            Some(why) => Err(why),
            None => Ok(value),
        }
    }

    /// Why the value cannot be stored or compared alike on every backend
    /// (NaN, a timestamp or date outside years 0000–9999), or `None`.
    pub(crate) fn unsupported(&self) -> Option<String> {
        match self {
            Value::Float(f) => bounds::float_unsupported(*f),
            Value::Timestamp(t) => bounds::timestamp_out_of_range(t),
            Value::Date(d) => bounds::date_out_of_range(d),
            _ => None,
        }
    }

    /// Compares two non-NULL values of the same kind; `None` for NULLs or
    /// different kinds. Text compares byte-wise, as on every backend.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        Some(match (self, other) {
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Integer(a), Value::Integer(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.partial_cmp(b)?,
            (Value::Decimal(a), Value::Decimal(b)) => compare_decimals(a, b)?,
            (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Uuid(a), Value::Uuid(b)) => a.cmp(b),
            (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
            (Value::Date(a), Value::Date(b)) => a.cmp(b),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            _ => return None,
        })
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "bool",
            Value::Integer(_) => "integer",
            Value::Float(_) => "float",
            Value::Decimal(_) => "decimal",
            Value::Text(_) => "text",
            Value::Uuid(_) => "uuid",
            Value::Timestamp(_) => "timestamp",
            Value::Date(_) => "date",
            Value::Json(_) => "json",
            Value::Bytes(_) => "bytes",
        }
    }
}

/// Parses an RFC 3339 timestamp, truncated to microseconds.
pub(crate) fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc).trunc_subsecs(6))
}

/// Checks a decimal literal (`-12.50`, `3`, `.5`) and returns it in
/// PostgreSQL's canonical text form: no `+`, no leading zeros, `0` before the
/// point, no `-` on zero; trailing zeros (the scale) are kept.
fn normalize_decimal(s: &str) -> Option<String> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let zero = int == "0" && frac.bytes().all(|b| b == b'0');
    let sign = if neg && !zero { "-" } else { "" };
    Some(if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    })
}

/// A total, exact order on decimal text, as SQLite's decimal collation:
/// decimals by value, then anything that is not one, byte-wise.
#[cfg(feature = "sqlite")]
pub(crate) fn decimal_order(a: &str, b: &str) -> Ordering {
    match (normalize_decimal(a), normalize_decimal(b)) {
        (Some(x), Some(y)) => compare_decimals(&x, &y).unwrap_or(Ordering::Equal),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.as_bytes().cmp(b.as_bytes()),
    }
}

/// Exact comparison of two decimal literals accepted by `normalize_decimal`.
fn compare_decimals(a: &str, b: &str) -> Option<Ordering> {
    fn parts(s: &str) -> (bool, String, String) {
        let neg = s.starts_with('-');
        let body = s.trim_start_matches(['-', '+']);
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let int = int.trim_start_matches('0').to_owned();
        let frac = frac.trim_end_matches('0').to_owned();
        let zero = int.is_empty() && frac.is_empty();
        (neg && !zero, int, frac)
    }
    let (an, ai, af) = parts(a);
    let (bn, bi, bf) = parts(b);
    let magnitude = ai
        .len()
        .cmp(&bi.len())
        .then_with(|| ai.cmp(&bi))
        .then_with(|| af.cmp(&bf));
    Some(match (an, bn) {
        (false, false) => magnitude,
        (true, true) => magnitude.reverse(),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
    })
}

macro_rules! value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self { Value::$variant(v.into()) }
        }
    )*};
}

value_from! {
    bool => Bool, i64 => Integer, i32 => Integer, u32 => Integer, i16 => Integer,
    f64 => Float, f32 => Float, String => Text, &str => Text, Uuid => Uuid,
    DateTime<Utc> => Timestamp, NaiveDate => Date, serde_json::Value => Json, Vec<u8> => Bytes,
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// The indefinite article for a type name in a message: "an integer", "a
/// uuid" (said "you-you-id"), "a text".
fn article(word: &str) -> &'static str {
    match word.bytes().next().map(|b| b.to_ascii_lowercase()) {
        Some(b'a' | b'e' | b'i' | b'o') => "an",
        _ => "a",
    }
}

/// Parses a `YYYY-MM-DD` date. For adapters.
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_compare_exactly() {
        let cmp = |a: &str, b: &str| compare_decimals(a, b).unwrap();
        assert_eq!(cmp("12.50", "12.5"), Ordering::Equal);
        assert_eq!(cmp("-1", "0.5"), Ordering::Less);
        assert_eq!(cmp("-2", "-10"), Ordering::Greater);
        assert_eq!(cmp("100", "99.999"), Ordering::Greater);
        assert_eq!(cmp("-0.0", "0"), Ordering::Equal);
        assert!(normalize_decimal("1e5").is_none());
        for (raw, canonical) in [
            ("+007.50", "7.50"),
            (".5", "0.5"),
            ("-0.00", "0.00"),
            ("5.", "5"),
            ("-3", "-3"),
        ] {
            assert_eq!(normalize_decimal(raw).as_deref(), Some(canonical), "{raw}");
        }
    }

    #[test]
    fn coercion_widens_and_parses() {
        assert_eq!(
            Value::Integer(3).coerce_to(&FieldType::Float),
            Ok(Value::Float(3.0))
        );
        let id = Uuid::new_v4();
        assert_eq!(
            Value::from(id.to_string()).coerce_to(&FieldType::Uuid),
            Ok(Value::Uuid(id))
        );
        assert!(Value::Text("x".into())
            .coerce_to(&FieldType::Integer)
            .is_err());
        assert!(Value::Null.coerce_to(&FieldType::Text).is_err());
        assert!(Value::from("a\0").coerce_to(&FieldType::Text).is_err());
    }

    #[test]
    fn mismatch_messages_use_the_right_article() {
        let said = |v: Value, ty: FieldType| v.coerce_to(&ty).unwrap_err();
        assert_eq!(
            said(Value::from("ten"), FieldType::Integer),
            "a text value does not fit an integer field"
        );
        assert_eq!(
            said(Value::Integer(1), FieldType::Bool),
            "an integer value does not fit a bool field"
        );
        assert_eq!(
            said(Value::Bool(true), FieldType::Other("OrderState".into())),
            "a bool value does not fit an OrderState field"
        );
        assert_eq!(
            said(Value::Float(1.5), FieldType::Uuid),
            "a float value does not fit a uuid field"
        );
    }
}
