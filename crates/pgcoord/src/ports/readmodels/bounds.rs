//! The values every backend stores alike, checked before a write and on a
//! filter's operand: timestamps and dates in years 0000–9999, floats other
//! than NaN, and zero without a sign. Checks on plain values: `Value` and
//! the stored form call them.
//!
//! SQLite stores timestamps and dates as text that orders like time only
//! with four-digit years (`+10000-…` sorts before `2000-…`, and chrono
//! writes such years in a form the fixed-width reader refuses); PostgreSQL
//! and memory would take them. SQLite stores NaN as NULL, PostgreSQL sorts
//! it above every number, and it has no order in memory; SQLite reads
//! `-0.0` back as `0.0`. Refusing (or, for `-0.0`, normalising) here keeps
//! the backends the same.

use chrono::{DateTime, Datelike, NaiveDate, Utc};

/// The years a timestamp or date may have, on every backend.
pub(crate) const YEARS: std::ops::RangeInclusive<i32> = 0..=9999;

/// NaN, which no two backends store and order alike.
pub(crate) fn float_unsupported(f: f64) -> Option<String> {
    f.is_nan()
        .then(|| "NaN is not a storable float (no two backends order it alike)".to_owned())
}

/// The timestamp's year is outside [`YEARS`].
pub(crate) fn timestamp_out_of_range(t: &DateTime<Utc>) -> Option<String> {
    let year = t.naive_utc().year();
    (!YEARS.contains(&year))
        .then(|| format!("timestamp {t:?} has year {year}, outside the supported years 0000-9999"))
}

pub(crate) fn date_out_of_range(d: &NaiveDate) -> Option<String> {
    let year = d.year();
    (!YEARS.contains(&year))
        .then(|| format!("date {d} has year {year}, outside the supported years 0000-9999"))
}

/// `-0.0` as `0.0` (SQLite keeps no sign on zero); anything else unchanged.
pub(crate) fn normalize_zero(f: f64) -> f64 {
    if f == 0.0 {
        0.0
    } else {
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn years_outside_four_digits_nan_are_refused_and_negative_zero_loses_its_sign() {
        let at = |y| Utc.with_ymd_and_hms(y, 1, 1, 0, 0, 0).unwrap();
        let day = |y| NaiveDate::from_ymd_opt(y, 1, 1).unwrap();
        for y in [0, 9999] {
            assert_eq!(timestamp_out_of_range(&at(y)), None);
            assert_eq!(date_out_of_range(&day(y)), None);
        }
        for y in [-1, 10_000] {
            let why = timestamp_out_of_range(&at(y)).expect("refused");
            assert!(why.contains("0000-9999"), "{why}");
            let why = date_out_of_range(&day(y)).expect("refused");
            assert!(why.contains("0000-9999"), "{why}");
        }
        assert_eq!(float_unsupported(f64::INFINITY), None);
        assert!(float_unsupported(f64::NAN).unwrap().contains("NaN"));
        assert!(normalize_zero(-0.0).is_sign_positive());
        assert!(normalize_zero(-1.0).is_sign_negative());
    }
}
