//! `ConnectOptions::parse` and `split_ssl_params` on any string: no panic,
//! and taking the TLS parameters out changes nothing else (the rest parses
//! to the same settings, and has no TLS parameter left).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pgcoord::inspect::split_ssl_params;
use pgcoord::ConnectOptions;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = ConnectOptions::parse(s);
    let Ok(split) = split_ssl_params(s) else {
        return;
    };
    // Of a string this crate takes (a key holding `://` may read as a URL
    // of another scheme once the pairs before it are taken out): the rest
    // has no TLS parameter left, and splits to itself.
    let Ok(whole) = parsed else {
        return;
    };
    let again = split_ssl_params(&split.rest).expect("the rest of a split string splits");
    assert_eq!(again.rest, split.rest, "the rest changed when split again");
    assert!(
        again.mode.is_none() && again.root_cert.is_none() && again.client_cert.is_none(),
        "TLS parameters left in the rest"
    );
    // Everything but TLS means the same in the rest as in the string.
    // (The rest alone may be refused: `sslnegotiation=direct` needs the
    // `sslmode` taken out.)
    if let Ok(rest) = ConnectOptions::parse(&split.rest) {
        let (a, b) = (whole.config(), rest.config());
        assert_eq!(a.get_user(), b.get_user(), "user");
        assert_eq!(a.get_password(), b.get_password(), "password");
        assert_eq!(a.get_dbname(), b.get_dbname(), "dbname");
        assert_eq!(a.get_hosts(), b.get_hosts(), "hosts");
        assert_eq!(a.get_ports(), b.get_ports(), "ports");
        assert_eq!(a.get_options(), b.get_options(), "options");
        assert_eq!(a.get_application_name(), b.get_application_name());
    }
});
