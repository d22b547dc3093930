//! A password never shows in an error of the library, nor in what the
//! CLI prints of a connection string (`redact_url`, `scrub`): a marker
//! password placed where libpq reads a password, with fuzzed text around.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pgcoord::inspect::split_ssl_params;
use pgcoord::ConnectOptions;

#[path = "../../crates/pgcoord-cli/src/redact.rs"]
#[allow(dead_code)]
mod redact;

const PW: &str = "Xy7SECRETz";

fn no_leak(what: &str, s: &str) {
    for e in [ConnectOptions::parse(s).err(), split_ssl_params(s).err()]
        .into_iter()
        .flatten()
    {
        let msg = e.to_string();
        assert!(
            !msg.contains("SECRET"),
            "{what}: error shows the password: {msg}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // The fuzzed text may name the marker itself (as a host, a parameter).
    if s.contains("SECRET") {
        return;
    }
    let (a, b) = s.split_at(
        s.char_indices()
            .nth(s.chars().count() / 2)
            .map_or(0, |(i, _)| i),
    );
    // libpq's userinfo: up to the first `@` (before any `/`).
    let url = format!("postgres://{a}:{PW}@{b}");
    no_leak("url userinfo", &url);
    assert!(
        !redact::redact_url(&url).contains("SECRET"),
        "redact_url: {url:?}"
    );
    // In free text a URL ends at a space or a quote, and its userinfo at
    // its first `@` when one comes before them (`scrub`'s rule).
    if !a.contains(|c: char| c.is_whitespace() || "@'\"`".contains(c)) {
        assert!(!redact::scrub(&url).contains("SECRET"), "scrub: {url:?}");
    }
    // A password with fuzzed text after it, in the userinfo.
    if !b.contains(['@', '/']) {
        let url = format!("postgres://u:{PW}{b}@h/db?{a}");
        no_leak("url password tail", &url);
        assert!(
            !redact::redact_url(&url).contains("SECRET"),
            "redact_url: {url:?}"
        );
    }
    // As a query parameter and a key=value pair.
    let url = format!("postgresql://{a}?password={PW}&{b}");
    no_leak("url query", &url);
    assert!(
        !redact::redact_url(&url).contains("SECRET"),
        "redact_url: {url:?}"
    );
    for kv in [
        format!("{a} password={PW} {b}"),
        format!("{a} password='{PW}' {b}"),
        format!("{a} password = {PW}"),
    ] {
        no_leak("key=value", &kv);
        // A quote or a backslash before it, or an `=` just before, may
        // make the marker no value (`password='a password=MARKER` is a
        // quoted value then a key; in `k= password = MARKER` the value of
        // `k` is `password`).
        if !a.contains(['\'', '"', '\\']) && !a.trim_end().ends_with('=') {
            assert!(
                !redact::redact_url(&kv).contains("SECRET"),
                "redact_url: {kv:?}"
            );
            assert!(!redact::scrub(&kv).contains("SECRET"), "scrub: {kv:?}");
        }
    }
});
