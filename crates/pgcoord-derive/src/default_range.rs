//! `#[column(default = lit)]` checked for its value, not only its kind: an
//! integer within the field's type (`default = 300` on a `u8` wrote a
//! default that every later read failed to decode), a date that exists, a
//! timestamp in RFC 3339, a UUID that parses.

use syn::Lit;

/// Why `lit` cannot be a default of a column holding `what` (a Rust type
/// name such as `u8` or `NaiveDate`, or a `kind` variant such as
/// `Integer`); `None` when it can, or when this check knows nothing of it.
pub(crate) fn out_of_range(what: &str, lit: &Lit) -> Option<String> {
    match lit {
        Lit::Int(i) => {
            let (min, max) = int_range(what)?;
            match i.base10_parse::<i128>() {
                Ok(v) if (min..=max).contains(&v) => None,
                _ => Some(format!("{i} is outside {what}'s range {min}..={max}")),
            }
        }
        Lit::Str(s) if matches!(what, "NaiveDate" | "Date") => {
            let v = s.value();
            (!is_date(&v)).then(|| format!("{v:?} is not a date (YYYY-MM-DD, a day that exists)"))
        }
        Lit::Str(s) if matches!(what, "DateTime" | "Timestamp") => {
            let v = s.value();
            (!is_timestamp(&v)).then(|| {
                format!(
                    "{v:?} is not an RFC 3339 timestamp in years 0000 to 9999 \
                     (e.g. \"2026-01-01T00:00:00Z\")"
                )
            })
        }
        Lit::Str(s) if what == "Uuid" => {
            let v = s.value();
            (!is_uuid(&v)).then(|| format!("{v:?} is not a UUID"))
        }
        _ => None,
    }
}

fn int_range(what: &str) -> Option<(i128, i128)> {
    Some(match what {
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "Integer" => (i64::MIN.into(), i64::MAX.into()),
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        _ => return None,
    })
}

/// `YYYY-MM-DD`, a day that exists (the proleptic Gregorian calendar).
fn is_date(v: &str) -> bool {
    let b = v.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r.clone()].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) {
        return false;
    }
    if !digits(8..10) {
        return false;
    }
    let num = |r: std::ops::Range<usize>| v[r].parse::<u32>().unwrap_or(0);
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 with an offset, in the years every backend stores (a year
/// outside 0000 to 9999 is refused at write time, so a default there could
/// never be read back).
fn is_timestamp(v: &str) -> bool {
    use chrono::Datelike;
    chrono::DateTime::parse_from_rfc3339(v)
        .is_ok_and(|t| (0..=9999).contains(&t.with_timezone(&chrono::Utc).year()))
}

/// Hyphenated (`8-4-4-4-12` hex digits) or 32 hex digits.
fn is_uuid(v: &str) -> bool {
    let hex = |s: &str| s.bytes().all(|c| c.is_ascii_hexdigit());
    match v.len() {
        32 => hex(v),
        36 => v.split('-').map(str::len).eq([8, 4, 4, 4, 12]) && hex(&v.replace('-', "")),
        _ => false,
    }
}
