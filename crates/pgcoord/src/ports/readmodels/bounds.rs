//! The values every backend stores alike, checked before a write and on a
//! filter's operand: timestamps and dates in years 0000–9999, floats other
//! than NaN, and zero without a sign.
//!
//! SQLite stores timestamps and dates as text that orders like time only
//! with four-digit years (`+10000-…` sorts before `2000-…`, and chrono
//! writes such years in a form the fixed-width reader refuses); PostgreSQL
//! and memory would take them. SQLite stores NaN as NULL, PostgreSQL sorts
//! it above every number, and it has no order in memory; SQLite reads
//! `-0.0` back as `0.0`. Refusing (or, for `-0.0`, normalising) here keeps
//! the backends the same.

use chrono::{DateTime, Datelike, NaiveDate, Utc};

use super::value::Value;

/// The years a timestamp or date may have, on every backend.
pub(crate) const YEARS: std::ops::RangeInclusive<i32> = 0..=9999;

/// Why `value` cannot be stored or compared alike on every backend, or
/// `None` when it can.
pub(crate) fn unsupported(value: &Value) -> Option<String> {
    match value {
        Value::Float(f) if f.is_nan() => {
            Some("NaN is not a storable float (no backend orders it alike)".into())
        }
        Value::Timestamp(t) => timestamp_out_of_range(t),
        Value::Date(d) => date_out_of_range(d),
        _ => None,
    }
}

/// The timestamp's year is outside [`YEARS`].
pub(crate) fn timestamp_out_of_range(t: &DateTime<Utc>) -> Option<String> {
    let year = t.naive_utc().year();
    (!YEARS.contains(&year))
        .then(|| format!("timestamp {t:?} has year {year}, outside the supported years 0000-9999"))
}

fn date_out_of_range(d: &NaiveDate) -> Option<String> {
    let year = d.year();
    (!YEARS.contains(&year))
        .then(|| format!("date {d} has year {year}, outside the supported years 0000-9999"))
}

/// `-0.0` as `0.0` (SQLite keeps no sign on zero); anything else unchanged.
pub(crate) fn normalize(value: &mut Value) {
    if let Value::Float(f) = value {
        if *f == 0.0 {
            *f = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn years_outside_four_digits_nan_are_refused_and_negative_zero_loses_its_sign() {
        let ts = |y| Value::Timestamp(Utc.with_ymd_and_hms(y, 1, 1, 0, 0, 0).unwrap());
        let day = |y| Value::Date(NaiveDate::from_ymd_opt(y, 1, 1).unwrap());
        for ok in [
            ts(0),
            ts(9999),
            day(0),
            day(9999),
            Value::Float(f64::INFINITY),
        ] {
            assert_eq!(unsupported(&ok), None, "{ok:?}");
        }
        for bad in [ts(-1), ts(10_000), day(-5), day(12_000)] {
            let why = unsupported(&bad).expect("refused");
            assert!(why.contains("0000-9999"), "{why}");
        }
        assert!(unsupported(&Value::Float(f64::NAN))
            .unwrap()
            .contains("NaN"));
        let mut z = Value::Float(-0.0);
        normalize(&mut z);
        assert!(matches!(z, Value::Float(f) if f.is_sign_positive()));
    }
}
