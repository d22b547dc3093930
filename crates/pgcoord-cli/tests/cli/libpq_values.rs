//! Values read as libpq reads them: only ASCII whitespace separates
//! `key=value` pairs, numbers may have spaces around them, an empty value
//! of some parameters is no value, a bracketed URL host is an IPv6
//! address or a socket directory (never empty), and a URL query parameter
//! has exactly one `=`.

use crate::common::*;
use crate::libpq_urls::{no_wait, run_with_url};

/// `key=value` with the database's settings and `extra` appended.
fn conninfo(db: &pgcoord_testkit::pg::TestDatabase, extra: &str) -> String {
    let config = db.config();
    format!(
        "host=127.0.0.1 port={} user={} dbname={}{extra}",
        config.get_ports()[0],
        config.get_user().unwrap(),
        db.name()
    )
}

/// A U+00A0 (no-break space) was taken as a separator: `dbname=app\u{a0}
/// application_name=x` reached the database `app`. libpq's separators are
/// ASCII: the database name is the whole of it.
#[tokio::test]
async fn a_non_ascii_space_belongs_to_the_value() {
    let db = database().await;
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", conninfo(&db, "\u{a0}application_name=x"))
            .args(no_wait("nbsp")),
    )
    .await;
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            // Shown escaped.
            "database \"{}\\u{{a0}}application_name=x\" does not exist",
            db.name()
        )),
        "{}",
        out.stderr
    );
}

/// `port=' 56431'`, `PGPORT=' 56431'` and `connect_timeout=' 5'` were
/// refused (exit 2); libpq reads numbers with spaces around them.
#[tokio::test]
async fn numbers_with_spaces_around_them_are_read() {
    let db = database().await;
    let config = db.config();
    let port = config.get_ports()[0];
    let base = format!(
        "host=127.0.0.1 user={} dbname={}",
        config.get_user().unwrap(),
        db.name()
    );
    for (url, pgport) in [
        (format!("{base} port=' {port}' connect_timeout=' 5'"), None),
        (format!("{base} port='{port} '"), None),
        (base.clone(), Some(format!(" {port}"))),
    ] {
        let mut cmd = eventsource(None);
        cmd.env("DATABASE_URL", &url).args(no_wait("spaced"));
        if let Some(p) = &pgport {
            cmd.env("PGPORT", p);
        }
        let out = output(&mut cmd).await;
        assert_eq!(out.code, 0, "{url} {pgport:?}: {out:?}");
    }
}

/// `?hostaddr=`, `?sslsni=` and `?ssl_min_protocol_version=` were refused
/// (exit 2); libpq takes an empty value of these as not given.
#[tokio::test]
async fn an_empty_hostaddr_sslsni_or_min_protocol_is_not_given() {
    let db = database().await;
    let base = crate::libpq_urls::tcp_url(&db, db.name());
    for query in [
        "hostaddr=",
        "sslsni=",
        "ssl_min_protocol_version=",
        "hostaddr=&sslsni=&ssl_min_protocol_version=",
    ] {
        let url = format!("{base}?{query}");
        let out = run_with_url(&url, "empty").await;
        assert_eq!(out.code, 0, "{url}: {out:?}");
    }
}

/// `[]` as a URL host reached the default socket (psql: "IPv6 host address
/// may not be empty"); `[/socket/dir]`, a socket directory in brackets
/// that psql takes, was refused.
#[tokio::test]
async fn a_bracketed_host_is_a_socket_directory_or_an_address_never_empty() {
    let (cluster, db) = private_db(&[]).await;
    let port = cluster.port();
    let url = format!("postgresql://postgres@[]:{port}/{}", db.name());
    let out = run_with_url(&url, "brackets").await;
    assert_eq!(out.code, 2, "{url}: {out:?}");
    assert!(
        out.stderr.contains("IPv6 host address may not be empty"),
        "{}",
        out.stderr
    );
    let url = format!(
        "postgresql://postgres@[{}]:{port}/{}",
        cluster.dir().display(),
        db.name()
    );
    let out = run_with_url(&url, "brackets").await;
    assert_eq!(out.code, 0, "{url}: {out:?}");
}

/// A query parameter with a second `=`, none, or an empty one between two
/// `&` was taken; psql refuses them (exit 2), and so does the tool now.
#[tokio::test]
async fn a_query_parameter_without_exactly_one_equals_sign_is_refused() {
    for query in [
        "options=-c%20search_path=foo",
        "application_name=a=b",
        "application_name",
        "&",
        "&application_name=x",
        "a=x&&port=1",
    ] {
        let url = format!("postgres://app@127.0.0.1:1/app?{query}");
        let out = run_with_url(&url, "query").await;
        assert_eq!(out.code, 2, "{url}: {out:?}");
        assert!(
            out.stderr.contains("key/value separator"),
            "{url}: {}",
            out.stderr
        );
    }
}
