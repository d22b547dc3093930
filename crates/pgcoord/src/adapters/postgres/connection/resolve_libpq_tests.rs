//! libpq's rules for deprecated, empty and spaced values (`requiressl`,
//! an empty password or user name), over environments built from maps.

use super::tests::resolve;
use crate::adapters::postgres::{LibpqEnv, SslMode};

#[test]
fn requiressl_1_is_sslmode_require_unless_sslmode_is_given() {
    let none = LibpqEnv::from_vars([("PGSYSCONFDIR", "/nonexistent")]);
    for s in [
        "host=h requiressl=1",
        "postgres://h/db?requiressl=1",
        "host=h requiressl=1x",
    ] {
        assert_eq!(resolve(Some(s), &none).ssl_mode(), SslMode::Require, "{s}");
    }
    // `requiressl=0` means nothing; sslmode wins over requiressl.
    assert_eq!(
        resolve(Some("host=h requiressl=0"), &none).ssl_mode(),
        SslMode::Prefer
    );
    for s in ["host=h requiressl=1 sslmode=disable", "host=h sslmode=disable requiressl=1"] {
        assert_eq!(resolve(Some(s), &none).ssl_mode(), SslMode::Disable, "{s}");
    }
    // PGREQUIRESSL=1 likewise, below PGSSLMODE and the string's sslmode.
    let env = LibpqEnv::from_vars([("PGREQUIRESSL", "1")]);
    assert_eq!(resolve(Some("host=h"), &env).ssl_mode(), SslMode::Require);
    assert_eq!(
        resolve(Some("host=h sslmode=verify-ca"), &env).ssl_mode(),
        SslMode::VerifyCa
    );
    let both = LibpqEnv::from_vars([("PGREQUIRESSL", "1"), ("PGSSLMODE", "disable")]);
    assert_eq!(resolve(Some("host=h"), &both).ssl_mode(), SslMode::Disable);
    let zero = LibpqEnv::from_vars([("PGREQUIRESSL", "0")]);
    assert_eq!(resolve(Some("host=h"), &zero).ssl_mode(), SslMode::Prefer);
}
