//! Strict parsing of durations such as `30s`, `500ms`, `2m`, `1h30m`, `1.5s`.
//!
//! Strict on purpose: a lock timeout that silently means something else
//! (a bare `30` read as milliseconds, `nan` read as "forever", `-1s` read as
//! "no wait") is worse than a usage error.

use std::time::Duration;

/// The longest duration accepted: one year. Longer values are almost
/// certainly mistakes, and would overflow deadline arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 3_600 * 1_000_000_000),
    ("d", 86_400 * 1_000_000_000),
];

const GRAMMAR: &str = "expected a number with a unit, such as 30s, 500ms, 2m, 1h30m or 1.5s \
                       (units: ns, us, ms, s, m, h, d)";

/// Parses a non-negative duration made of one or more `<number><unit>` parts.
///
/// Accepted: digits with an optional decimal fraction, directly followed by
/// a unit; several parts add up (`1m30s`). Rejected: a sign, a bare number
/// without a unit, spaces, exponents, `nan`, `inf`, anything above
/// [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if text.is_empty() {
        return Err(format!("empty duration: {GRAMMAR}"));
    }
    if text.starts_with('-') {
        return Err(format!(
            "negative duration {text:?}: durations are at least 0"
        ));
    }
    if text.starts_with('+') {
        return Err(format!("duration {text:?} has a sign: {GRAMMAR}"));
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut total_ns: u128 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let int_part = &text[start..i];
        let mut frac_part = "";
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            let fstart = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            frac_part = &text[fstart..i];
            if frac_part.is_empty() {
                return Err(format!("invalid duration {text:?}: {GRAMMAR}"));
            }
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(format!("invalid duration {text:?}: {GRAMMAR}"));
        }
        let ustart = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit = &text[ustart..i];
        if unit.is_empty() {
            return Err(if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                format!("duration {text:?} has no unit: {GRAMMAR}")
            } else {
                format!("invalid duration {text:?}: {GRAMMAR}")
            });
        }
        let Some(&(_, unit_ns)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(format!(
                "unknown unit {unit:?} in duration {text:?}: {GRAMMAR}"
            ));
        };
        let too_long = || {
            format!(
                "duration {text:?} is too long: at most {}d",
                MAX_DURATION.as_secs() / 86_400
            )
        };
        let int_value: u128 = if int_part.is_empty() {
            0
        } else {
            // More than 30 digits is far beyond MAX_DURATION in any unit.
            if int_part.len() > 30 {
                return Err(too_long());
            }
            int_part.parse().map_err(|_| too_long())?
        };
        // Fractions finer than a nanosecond are dropped.
        let mut frac_ns: u128 = 0;
        let mut scale: u128 = 1;
        for d in frac_part.bytes().take(18) {
            frac_ns = frac_ns * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        let part_ns = int_value
            .checked_mul(unit_ns)
            .and_then(|v| v.checked_add(frac_ns * unit_ns / scale))
            .ok_or_else(too_long)?;
        total_ns = total_ns.checked_add(part_ns).ok_or_else(too_long)?;
        if total_ns > MAX_DURATION.as_nanos() {
            return Err(too_long());
        }
    }
    let secs = (total_ns / 1_000_000_000) as u64;
    let nanos = (total_ns % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Like [`parse_duration`], but zero is refused (for `--timeout`, where
/// "one attempt" is spelled `--no-wait`).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!(
            "a zero timeout ({text:?}) is not allowed: use --no-wait for a single attempt"
        ));
    }
    Ok(d)
}

/// The shortest `--watchdog`: its heartbeats come every quarter of it.
pub const MIN_WATCHDOG: Duration = Duration::from_millis(100);

/// Parses `--watchdog`: at least [`MIN_WATCHDOG`].
pub fn parse_watchdog(text: &str) -> Result<Duration, String> {
    parse_at_least(text, MIN_WATCHDOG, "for a watchdog")
}

/// A DURATION of at least `min`; `what` completes "is too short ...".
fn parse_at_least(text: &str, min: Duration, what: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < min {
        return Err(format!(
            "{text:?} is too short {what}: at least {}",
            format_duration(min)
        ));
    }
    Ok(d)
}

/// The shortest refresh of a view that looks again and again (`lock
/// top`, `lock holders --watch`, `leader show --watch`, `projection status
/// --watch`): each look runs queries on the server, and a typo such as
/// `0s` must not turn a monitor into load.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Parses a refresh interval (`--interval`, `--every`): a DURATION of at
/// least [`MIN_INTERVAL`].
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    parse_at_least(text, MIN_INTERVAL, "a refresh interval")
}

/// The shortest `--lease` (the server's TCP keepalive settings count in
/// whole seconds).
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// The longest `--lease`, in days: PostgreSQL's largest
/// `idle_session_timeout` is `INT_MAX` ms (about 24.8 days), and the
/// server must not free a silent holder's lock before its lease runs out.
pub const MAX_LEASE_DAYS: u64 = 24;

/// Parses `--lease`: at least [`MIN_LEASE`], at most [`MAX_LEASE_DAYS`].
pub fn parse_lease(text: &str) -> Result<Duration, String> {
    let lease = parse_at_least(text, MIN_LEASE, "for a lease")?;
    if lease > Duration::from_secs(MAX_LEASE_DAYS * 86_400) {
        return Err(format!(
            "{text:?} is too long for a lease: at most {MAX_LEASE_DAYS}d (PostgreSQL ends a \
             silent session after at most about 24.8 days)"
        ));
    }
    Ok(lease)
}

/// Parses `--min-interval`: more than 0.
pub fn parse_min_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!(
            "{text:?} is no interval: --min-interval needs more than 0 (e.g. 1h)"
        ));
    }
    Ok(d)
}

/// Formats a duration for messages: `30s`, `500ms`, `2m5s`, `1.5s`,
/// `100d`, `99d23h59m55s` (days from 24 hours on, as `--timeout 100d` is
/// typed).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d.as_micros() == 0 {
        return format!("{}ns", d.as_nanos());
    }
    if ms == 0 {
        return format!("{}us", d.as_micros());
    }
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    if !ms.is_multiple_of(1_000) && secs < 60 {
        let number = format!("{:.3}", d.as_secs_f64());
        return format!("{}s", number.trim_end_matches('0').trim_end_matches('.'));
    }
    let (d, h, m, s) = (
        secs / 86_400,
        (secs % 86_400) / 3600,
        (secs % 3600) / 60,
        secs % 60,
    );
    let mut out = String::new();
    if d > 0 {
        out.push_str(&format!("{d}d"));
    }
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Longer leases than the server's largest idle_session_timeout would
    /// let it free a silent holder's lock before the tool counts it lost.
    #[test]
    fn leases_are_ones_the_server_keeps() {
        assert_eq!(parse_lease("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_lease("24d"), Ok(Duration::from_secs(24 * 86_400)));
        for bad in ["999ms", "24d1s", "25d", "30d"] {
            assert!(parse_lease(bad).is_err(), "{bad}");
        }
        assert!(parse_lease("30d").unwrap_err().contains("at most 24d"));
    }

    #[test]
    fn intervals_below_the_minimum_or_malformed_are_refused() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["0s", "50ms", "-1s", "1", "soon", ""] {
            assert!(parse_interval(bad).is_err(), "{bad}");
        }
    }

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn accepts_units_fractions_and_compounds() {
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2m"), Duration::from_secs(120));
        assert_eq!(ok("1h"), Duration::from_secs(3600));
        assert_eq!(ok("1d"), Duration::from_secs(86_400));
        assert_eq!(ok("250us"), Duration::from_micros(250));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("0.001s"), Duration::from_millis(1));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1h2m3s4ms"), Duration::from_millis(3_723_004));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("0ms"), Duration::ZERO);
        assert_eq!(ok("365d"), MAX_DURATION);
    }

    #[test]
    fn rejects_negative_signed_garbage_nan_and_unitless() {
        for bad in [
            "", "-1s", "-0s", "+1s", "30", "0", "abc", "s", "nan", "NaN", "inf", "infinity",
            "1e3s", "1.s", "1..5s", "1.5.2s", " 1s", "1s ", "1 s", "1sec", "1S", "1mss", "5x",
            "1s-", "0x10s", "١s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn messages_name_the_problem() {
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(parse_duration("nan").unwrap_err().contains("30s"));
        assert!(parse_duration("3x").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("366d").unwrap_err().contains("too long"));
        assert!(parse_duration("99999999999999999999999999999999999h")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn timeout_refuses_zero_but_grace_allows_it() {
        assert!(parse_timeout("0s").unwrap_err().contains("--no-wait"));
        assert!(parse_timeout("0.0ms").is_err());
        assert_eq!(parse_timeout("1ns").unwrap(), Duration::from_nanos(1));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn formats_for_humans() {
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m5s");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_micros(250)), "250us");
        assert_eq!(format_duration(Duration::from_nanos(1)), "1ns");
        // Long ones in days, as typed: not 2400h, nor 8640000s.
        assert_eq!(format_duration(Duration::from_secs(23 * 3600)), "23h");
        assert_eq!(format_duration(Duration::from_secs(86_400)), "1d");
        assert_eq!(format_duration(ok("100d")), "100d");
        assert_eq!(
            format_duration(ok("100d") - Duration::from_secs(5)),
            "99d23h59m55s"
        );
        assert_eq!(format_duration(ok("1d30s")), "1d30s");
        assert_eq!(format_duration(MAX_DURATION), "365d");
    }
}
