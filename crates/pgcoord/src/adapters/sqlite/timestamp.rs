//! The text form of timestamps on SQLite: fixed-width RFC 3339 with
//! microseconds and `Z` (`2026-12-02T06:30:00.123456Z`), so that text order
//! is time order.
//!
//! Every stored row carries two or three of them, so they are written and
//! read by hand for that one shape: chrono's `format` interprets its
//! pattern on every call and costs more than the rest of a row's binding.
//! Anything else (a year outside 0..=9999, a leap second, text written by
//! someone else in another RFC 3339 form) goes through chrono as before.

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};

/// The pattern [`format`] writes, in chrono's terms.
pub(super) const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

/// Length of the fixed-width form.
const WIDTH: usize = 27;

/// `t` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (microseconds truncated).
pub(super) fn format(t: &DateTime<Utc>) -> String {
    // The naive form once: each accessor of `DateTime` converts again.
    let n = t.naive_utc();
    let (year, nanos) = (n.year(), n.nanosecond());
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        return t.format(TIMESTAMP_FORMAT).to_string();
    }
    let mut b = [0u8; WIDTH];
    digits(&mut b[0..4], year as u32);
    b[4] = b'-';
    digits(&mut b[5..7], n.month());
    b[7] = b'-';
    digits(&mut b[8..10], n.day());
    b[10] = b'T';
    digits(&mut b[11..13], n.hour());
    b[13] = b':';
    digits(&mut b[14..16], n.minute());
    b[16] = b':';
    digits(&mut b[17..19], n.second());
    b[19] = b'.';
    digits(&mut b[20..26], nanos / 1_000);
    b[26] = b'Z';
    // Only ASCII digits and separators were written.
    String::from_utf8(b.to_vec()).expect("ASCII")
}

/// Writes `n` as decimal digits filling `out` (leading zeros).
fn digits(out: &mut [u8], mut n: u32) {
    for d in out.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// A stored timestamp: the fixed-width form read directly, any other RFC
/// 3339 text through chrono. `None` when it is not a timestamp.
pub(super) fn parse(s: &str) -> Option<DateTime<Utc>> {
    fixed(s.as_bytes()).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    })
}

fn fixed(b: &[u8]) -> Option<DateTime<Utc>> {
    if b.len() != WIDTH
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[26] != b'Z'
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let date = NaiveDate::from_ymd_opt(n(0..4)? as i32, n(5..7)?, n(8..10)?)?;
    let time = date.and_hms_micro_opt(n(11..13)?, n(14..16)?, n(17..19)?, n(20..26)?)?;
    Some(time.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn chrono_form(t: &DateTime<Utc>) -> String {
        t.format(TIMESTAMP_FORMAT).to_string()
    }

    #[test]
    fn writes_what_chrono_writes() {
        let mut cases = vec![
            Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-1, 6, 15, 12, 30, 0).unwrap(),
            Utc.timestamp_opt(1_700_000_000, 999_999_999).unwrap(),
            // A leap second.
            Utc.timestamp_opt(1_483_228_799, 1_500_000_000).unwrap(),
        ];
        // A spread of instants with every sub-second digit in use.
        let mut x: i64 = 12_345;
        for _ in 0..2_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let secs = (x >> 20).rem_euclid(253_402_300_799);
            let nanos = (x as u64 % 1_000_000_000) as u32;
            cases.push(Utc.timestamp_opt(secs, nanos).unwrap());
        }
        for t in &cases {
            assert_eq!(format(t), chrono_form(t), "{t:?}");
        }
    }

    #[test]
    fn reads_what_it_writes_and_any_rfc3339() {
        let t = Utc.with_ymd_and_hms(2026, 12, 2, 6, 20, 0).unwrap()
            + chrono::Duration::microseconds(123_456);
        assert_eq!(parse(&format(&t)), Some(t));
        assert_eq!(parse("2026-12-02T06:20:00.123456Z"), Some(t));
        // Other RFC 3339 forms still read (through chrono).
        assert_eq!(parse("2026-12-02 07:20:00.123456+01:00"), Some(t));
        assert_eq!(
            parse("2026-12-02T06:20:00.123Z"),
            Some(t - chrono::Duration::microseconds(456))
        );
        assert_eq!(
            parse("2026-12-02T06:20:00.123456z"),
            DateTime::parse_from_rfc3339("2026-12-02T06:20:00.123456z")
                .ok()
                .map(|t| t.with_timezone(&Utc))
        );
        // Not timestamps, in the fixed shape or not.
        for bad in [
            "2026-13-02T06:20:00.123456Z",
            "2026-02-30T06:20:00.123456Z",
            "2026-12-02T24:20:00.123456Z",
            "2026-12-02T06:20:0x.123456Z",
            "+026-12-02T06:20:00.123456Z",
            "yesterday",
            "",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
