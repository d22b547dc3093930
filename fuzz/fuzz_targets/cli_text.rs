//! The CLI's parsers of what a user types (durations, NAMEs, KEYs) and its
//! printing of text others control (escaping, password masking, error
//! lines), compiled in from its sources; and the key -> lock id derivation.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/pgcoord-cli/src/duration.rs"]
#[allow(dead_code)]
mod duration;
#[path = "../../crates/pgcoord-cli/src/error_line.rs"]
#[allow(dead_code)]
mod error_line;
#[path = "../../crates/pgcoord-cli/src/names.rs"]
#[allow(dead_code)]
mod names;
#[path = "../../crates/pgcoord-cli/src/printable.rs"]
#[allow(dead_code)]
mod printable;
#[path = "../../crates/pgcoord-cli/src/redact.rs"]
#[allow(dead_code)]
mod redact;

use printable::{printable, printable_json, shortened};

fn durations(s: &str) {
    let parsed = duration::parse_duration(s);
    for other in [
        duration::parse_timeout(s).ok(),
        duration::parse_interval(s).ok(),
        duration::parse_lease(s).ok(),
        duration::parse_watchdog(s).ok(),
        duration::parse_min_interval(s).ok(),
    ]
    .into_iter()
    .flatten()
    {
        assert_eq!(Ok(other), parsed, "{s:?}");
    }
    if let Ok(d) = parsed {
        assert!(d <= duration::MAX_DURATION, "{s:?}");
        assert!(s.is_ascii(), "{s:?} accepted");
        // What a message shows of a duration reads back as one.
        let shown = duration::format_duration(d);
        assert!(
            duration::parse_duration(&shown).is_ok(),
            "{s:?} shown as {shown:?}"
        );
    }
}

fn escaping(s: &str, other: &str, width: usize) {
    let shown = printable(s);
    assert!(
        !shown.chars().any(char::is_control),
        "{s:?} shown as {shown:?}"
    );
    // Two different texts never print the same.
    if s != other {
        assert_ne!(shown, printable(other), "{s:?} and {other:?} print alike");
    }
    let short = shortened(s, width);
    assert!(
        short.chars().count() <= width.max(1),
        "{s:?} in {width}: {short:?}"
    );
    // serde_json's text (its layout has no tab, nor a carriage return).
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(s) {
        let compact = serde_json::to_string(&value).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        for json in [compact, pretty] {
            let shown = printable_json(&json);
            assert!(
                !shown.chars().any(|c| c.is_control() && c != '\n'),
                "{shown:?}"
            );
            let back: serde_json::Value = serde_json::from_str(&shown).expect("still JSON");
            // (Compared with the text read back: serde_json's floats may
            // not round-trip.)
            let want: serde_json::Value = serde_json::from_str(&json).unwrap();
            assert_eq!(back, want, "{json:?}");
        }
    }
    let _ = printable::capped(s, width);
}

fn names(s: &str) {
    let _ = names::parse_name(s);
    let _ = names::parse_election_name(s);
    let _ = names::parse_key(s);
    let _ = names::parse_holder_id(s);
    let _ = names::holder_id_warning(s);
    assert!(pgcoord::lock_id_for_key(s) >= 0);
}

fn masking(s: &str) {
    static SECRETS: std::sync::Once = std::sync::Once::new();
    SECRETS.call_once(|| {
        redact::register(["pw".into(), "postgres".into(), "a b".into(), "é%41".into()]);
    });
    let _ = redact::redact_url(s);
    let _ = redact::scrub(s);
    let _ = redact::scrub_secrets(s);
    let _ = error_line::shown(s);
    let _ = error_line::one_line(s);
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let s = text.as_ref();
    let (a, b) = s.split_at(
        s.char_indices()
            .nth(usize::from(first) % (s.chars().count() + 1))
            .map_or(s.len(), |(i, _)| i),
    );
    durations(s);
    escaping(a, b, usize::from(first % 64) + 1);
    names(s);
    masking(s);
});
