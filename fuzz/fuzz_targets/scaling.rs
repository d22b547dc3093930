//! Quadratic blowups: the input repeated to 64 KiB (a long
//! `--database-url`, a server's message of a megabyte, a service file) must
//! go through every parser in well under the fuzzer's `-timeout`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pgcoord::inspect::split_ssl_params;
use pgcoord::ConnectOptions;

#[path = "../../crates/pgcoord-cli/src/duration.rs"]
#[allow(dead_code)]
mod duration;
#[path = "../../crates/pgcoord-cli/src/error_line.rs"]
#[allow(dead_code)]
mod error_line;
#[path = "../../crates/pgcoord-cli/src/printable.rs"]
#[allow(dead_code)]
mod printable;
#[path = "../../crates/pgcoord-cli/src/redact.rs"]
#[allow(dead_code)]
mod redact;

const LEN: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let Ok(unit) = std::str::from_utf8(data) else {
        return;
    };
    if unit.is_empty() || unit.len() > 64 {
        return;
    }
    let s = unit.repeat(LEN / unit.len());
    let start = std::time::Instant::now();
    let _ = ConnectOptions::parse(&s);
    let _ = split_ssl_params(&s);
    let _ = duration::parse_duration(&s);
    let _ = printable::printable(&s);
    let _ = printable::shortened(&s, 40);
    let _ = printable::printable_json(&s);
    let _ = redact::redact_url(&s);
    let _ = redact::scrub_secrets(&s);
    let _ = error_line::shown(&s);
    let took = start.elapsed();
    // Linear work on 64 KiB takes at most a few hundred milliseconds
    // (with the address sanitizer, on a busy machine); a quadratic one,
    // seconds or minutes (and the fuzzer's `-timeout` catches those too).
    assert!(
        took.as_millis() < 1500,
        "{unit:?} x {}: {took:?}",
        LEN / unit.len()
    );
});
