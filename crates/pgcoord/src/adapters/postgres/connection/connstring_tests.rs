//! Tests of `connstring.rs`: splitting URLs and `key=value` strings.

use super::*;
use crate::adapters::postgres::connection::options::ConnectOptions;

#[test]
fn a_url_of_another_scheme_says_so() {
    for url in ["mysql://u@h/db", "http://h:5432/db", "POSTGRES://u@h/db"] {
        let e = split_tls(url).unwrap_err().to_string();
        assert!(e.contains("use postgres:// or postgresql://"), "{url}: {e}");
    }
    // Not a scheme: a conninfo value that happens to hold "://".
    assert!(split_tls("host=h options='-c x=a://b'").is_ok());
    // Every reader of a connection string says so, not only this one.
    let e = params("mysql://u@h/db").unwrap_err().to_string();
    assert!(e.contains("use postgres:// or postgresql://"), "{e}");
}

#[test]
fn split_tls_keeps_the_rest_as_written() {
    let (rest, tls, saw) = split_tls(
        "postgres://u:p@h:5/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca%20x.pem",
    )
    .unwrap();
    assert_eq!(rest, "postgres://u:p@h:5/db?application_name=x");
    assert_eq!(tls.mode, SslMode::VerifyFull);
    assert!(saw);
    assert_eq!(tls.root_cert.unwrap().to_str(), Some("/tmp/ca x.pem"));
    let (rest, tls, saw) =
        split_tls("host=h dbname=d sslmode=verify-ca sslrootcert=/ca.pem user=u").unwrap();
    assert_eq!(rest, "host=h dbname=d user=u");
    assert_eq!(tls.mode, SslMode::VerifyCa);
    assert!(saw);
    let (rest, _, saw) = split_tls("postgres://h/db").unwrap();
    assert_eq!((rest.as_str(), saw), ("postgres://h/db", false));
    assert!(split_tls("postgres://h/db?sslmode=sometimes").is_err());
    assert!(split_tls("postgres://h/db?sslrootcert=%ff").is_err());
}

fn param<'a>(got: &'a [(String, String)], key: &str) -> Option<&'a str> {
    got.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn credentials_run_to_the_first_at_sign_as_libpq_reads_them() {
    // libpq: up to the first `@` (before any `/`) is user[:password], so a
    // `?`, `#`, `[`, `]` or `:` there is the password's.
    for (url, password) in [
        (
            "postgres://app:k3?Jd8Lq2=xYz@db.example/app",
            "k3?Jd8Lq2=xYz",
        ),
        ("postgres://app:a#b[c]d:e@db.example/app", "a#b[c]d:e"),
        (
            "postgresql://app:p%40ss?x@db.example:6432/app?sslmode=disable",
            "p@ss?x",
        ),
    ] {
        let got = params(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(param(&got, "user"), Some("app"), "{url}");
        assert_eq!(param(&got, "password"), Some(password), "{url}");
        assert_eq!(param(&got, "host"), Some("db.example"), "{url}");
        assert_eq!(param(&got, "dbname"), Some("app"), "{url}");
    }
    // The query of a URL whose password holds a `?` is still found.
    let (rest, tls, saw) = split_tls("postgres://u:p?w@h/db?sslmode=require&x=1").unwrap();
    assert_eq!(rest, "postgres://u:p?w@h/db?x=1");
    assert_eq!((tls.mode, saw), (SslMode::Require, true));
    let (rest, _, saw) = split_tls("postgres://u:p?sslmode=disable@h/db").unwrap();
    assert_eq!(
        (rest.as_str(), saw),
        ("postgres://u:p?sslmode=disable@h/db", false)
    );
}

#[test]
fn no_error_repeats_text_of_the_credentials() {
    for url in [
        // A `/` ends libpq's credentials early: the tail is read as a query.
        "postgres://app:k3/x?Jd8Lq2=xYz@db.example/app",
        "postgres://app:k3/x?Jd8Lq2@db.example/app",
        "postgres://u:p@h/db?sslmode=Jd8Lq2xYz",
        "postgres://u:Jd8%zzLq2xYz@h/db",
    ] {
        let err = ConnectOptions::parse(url).unwrap_err().to_string();
        assert!(!err.contains("Jd8") && !err.contains("xYz"), "{url}: {err}");
        let err = split_ssl_params(url)
            .map(|_| ())
            .map_or_else(|e| e.to_string(), |_| String::new());
        assert!(!err.contains("Jd8") && !err.contains("xYz"), "{url}: {err}");
    }
    // A typo in a query after the last `@` is still named.
    let err = ConnectOptions::parse("postgres://u:p@h/db?aplication_name=x")
        .unwrap_err()
        .to_string();
    assert!(err.contains("`aplication_name`"), "{err}");
}

#[test]
fn the_database_name_is_the_path_after_the_first_slash_as_written() {
    for (url, db) in [
        ("postgres://h:5432//postgres", "/postgres"),
        ("postgres://h/a/../b", "a/../b"),
        ("postgres://h/db%2Fx", "db/x"),
        ("postgres://h/db#1", "db#1"),
    ] {
        let got = params(url).unwrap();
        assert_eq!(param(&got, "dbname"), Some(db), "{url}");
    }
    let got = params("postgres://h/db?application_name=a#b").unwrap();
    assert_eq!(param(&got, "application_name"), Some("a#b"));
    let o = ConnectOptions::parse("postgres://h:5432//postgres").unwrap();
    assert_eq!(o.config().get_dbname(), Some("/postgres"));
}

#[test]
fn a_url_with_a_tab_or_line_break_is_refused_not_changed() {
    for url in [
        "postgres://h/postgres\nfoo",
        "postgres://h/postgres\rfoo",
        "postgres://h/db?application_name=a\tb",
        "postgres://u:se\ncretXYZ@h/db",
    ] {
        let err = params(url).unwrap_err().to_string();
        assert!(err.contains("a tab or a line break"), "{url:?}: {err}");
        assert!(!err.contains("cretXYZ"), "{err}");
        assert!(split_tls(url).is_err(), "{url:?}");
    }
    // Percent-encoded, they are the value's.
    let got = params("postgres://h/postgres%0Afoo").unwrap();
    assert_eq!(param(&got, "dbname"), Some("postgres\nfoo"));
}

#[test]
fn an_at_sign_after_the_credentials_is_refused_without_repeating_the_url() {
    // An unencoded `/` or `@` in a password: libpq would read the tail as
    // a host or a database name, which would then be shown.
    for url in [
        "postgresql://plain:2024/SecretX@127.0.0.1:56431/app",
        "postgresql://ua:a@SecretX@127.0.0.1:56431/app",
        "postgresql://ua:pw@127.0.0.1:56431,SecretX@127.0.0.1:56431/app",
        "postgresql://127.0.0.1:56431/app@SecretX?sslmode=disable",
    ] {
        for err in [
            params(url).unwrap_err().to_string(),
            split_ssl_params(url).unwrap_err().to_string(),
            ConnectOptions::parse(url).unwrap_err().to_string(),
        ] {
            assert!(err.contains("written %40 or %2F"), "{url}: {err}");
            assert!(
                !err.contains("SecretX") && !err.contains("127."),
                "{url}: {err}"
            );
        }
    }
    // After the `?` an `@` is a value's; encoded, it is the password's.
    let got = params("postgres://u:a%40b@h/db?application_name=x@y").unwrap();
    assert_eq!(param(&got, "password"), Some("a@b"));
    assert_eq!(param(&got, "application_name"), Some("x@y"));
}

#[test]
fn a_query_parameter_needs_exactly_one_equals_sign_as_in_libpq() {
    for url in [
        "postgres://h/db?options=-c%20search_path=fooXYZ",
        "postgres://h/db?application_name=a=bXYZ",
        "postgres://h/db?application_nameXYZ",
        "postgres://h/db?&",
        "postgres://h/db?&application_name=xXYZ",
        "postgres://h/db?a=xXYZ&&port=1",
    ] {
        for err in [
            params(url).unwrap_err().to_string(),
            split_ssl_params(url).unwrap_err().to_string(),
        ] {
            assert!(err.contains("key/value separator"), "{url}: {err}");
            assert!(!err.contains("XYZ"), "{url}: {err}");
        }
    }
    // A trailing `&` or a bare trailing `?` is fine; %3D is a value's `=`.
    for url in ["postgres://h/db?port=1&", "postgres://h/db?"] {
        assert!(params(url).is_ok(), "{url}");
        assert!(split_ssl_params(url).is_ok(), "{url}");
    }
    let got = params("postgres://h/db?options=-c%20search_path%3Dfoo").unwrap();
    assert_eq!(param(&got, "options"), Some("-c search_path=foo"));
}

#[test]
fn only_ascii_whitespace_separates_key_value_pairs_as_in_libpq() {
    let got = params("dbname=app\u{a0}application_name=x").unwrap();
    assert_eq!(param(&got, "dbname"), Some("app\u{a0}application_name=x"));
    assert_eq!(param(&got, "application_name"), None);
    let got = params("password=a\u{2003}b\u{a0}c\x0bdbname=app").unwrap();
    assert_eq!(param(&got, "password"), Some("a\u{2003}b\u{a0}c"));
    assert_eq!(param(&got, "dbname"), Some("app"));
    let o = ConnectOptions::parse("host=h password=p\u{a0}w").unwrap();
    assert_eq!(o.config().get_password(), Some("p\u{a0}w".as_bytes()));
}

#[test]
fn bracketed_hosts_as_libpq_reads_them() {
    let err = params("postgresql://u@[]:56431/app")
        .unwrap_err()
        .to_string();
    assert!(err.contains("IPv6 host address may not be empty"), "{err}");
    assert!(ConnectOptions::parse("postgresql://u@[]/app").is_err());
    // A socket directory in brackets, as libpq takes it.
    let got = params("postgresql://u@[/tmp/dir]:56431/app").unwrap();
    assert_eq!(param(&got, "host"), Some("/tmp/dir"));
    assert_eq!(param(&got, "port"), Some("56431"));
    let o = ConnectOptions::parse("postgresql://u@[/tmp/dir]:56431/app").unwrap();
    assert_eq!(
        o.config().get_hosts(),
        [tokio_postgres::config::Host::Unix("/tmp/dir".into())]
    );
    let got = params("postgresql://u@[::1]:5/app").unwrap();
    assert_eq!(param(&got, "host"), Some("::1"));
}

/// Found by fuzzing: `postgres://h[db?sslmode=require` was the host
/// `h[db?sslmode=require` to the URL reader and the host `h[db` with a
/// query to the TLS splitter. libpq opens brackets only at a host's start.
#[test]
fn a_bracket_inside_a_host_name_opens_nothing() {
    let got = params("postgres://h[db?sslmode=require").unwrap();
    assert_eq!(param(&got, "host"), Some("h[db"));
    assert_eq!(param(&got, "sslmode"), Some("require"));
    let (rest, tls, saw) = split_tls("postgres://h[db?sslmode=require").unwrap();
    assert_eq!(rest, "postgres://h[db");
    assert_eq!((tls.mode, saw), (SslMode::Require, true));
    let got = params("postgres://h[x/y]/db").unwrap();
    assert_eq!(param(&got, "host"), Some("h[x"));
    assert_eq!(param(&got, "dbname"), Some("y]/db"));
    // At a host's start, after a comma too, brackets still hold a `/` or `?`.
    let got = params("postgres://a,[/tmp?x]:6/db?port=7").unwrap();
    assert_eq!(param(&got, "host"), Some("a,/tmp?x"));
    let (rest, _, _) = split_tls("postgres://a,[/tmp?x]:6/db?sslmode=disable").unwrap();
    assert_eq!(rest, "postgres://a,[/tmp?x]:6/db");
}

/// Found by fuzzing: a value ending in an escaped space (`password=pw\ `)
/// lost it in the rest of `split_tls`, each pair having been cut at its
/// trailing spaces, the escaped one too.
#[test]
fn an_escaped_space_ending_a_value_stays_in_the_rest() {
    let (rest, _, _) = split_tls("password=pw\\  sslmode=require host=h").unwrap();
    assert_eq!(rest, "password=pw\\  host=h");
    assert_eq!(param(&params(&rest).unwrap(), "password"), Some("pw "));
    let (rest, _, _) = split_tls("sslmode=require password=pw\\\t").unwrap();
    assert_eq!(param(&params(&rest).unwrap(), "password"), Some("pw\t"));
    // The spaces after an empty value's `=` are not the value's.
    let (rest, _, _) = split_tls("host=h sslmode=disable application_name=  ").unwrap();
    assert_eq!(rest, "host=h application_name=");
}
