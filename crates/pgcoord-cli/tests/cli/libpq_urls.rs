//! URLs read as libpq reads them (credentials up to the first `@`, the
//! database name as written after the first `/`, a tab or line break
//! refused rather than dropped), secrets of every spelling never printed,
//! and a service file with no end not read into memory.

use crate::common::*;
use crate::libpq_env::password_cluster;

/// `postgres://USER@127.0.0.1:PORT/` then `path` (the database's name, as
/// the test writes it) for `db`.
pub(crate) fn tcp_url(db: &pgcoord_testkit::pg::TestDatabase, path: &str) -> String {
    let config = db.config();
    format!(
        "postgres://{}@127.0.0.1:{}/{path}",
        config.get_user().unwrap(),
        config.get_ports()[0]
    )
}

pub(crate) fn no_wait(key: &str) -> [&str; 6] {
    ["lock", "run", "--no-wait", key, "--", "true"]
}

/// `lock run --no-wait KEY -- true` with `DATABASE_URL` = `url`.
pub(crate) async fn run_with_url(url: &str, key: &str) -> Output {
    output(
        eventsource(None)
            .env("DATABASE_URL", url)
            .args(no_wait(key)),
    )
    .await
}

/// `k3?Jd8Lq2=xYz` was cut at its `?`: exit 2 naming `Jd8Lq2`, a piece
/// of the password. libpq (psql) takes it whole, and so does the tool.
#[tokio::test]
async fn a_password_holding_a_question_mark_logs_in_whole() {
    let (cluster, db) = password_cluster().await;
    let password = "k3?Jd8Lq2=xYz#[x]:y";
    db.connect()
        .await
        .unwrap()
        .batch_execute(&format!("ALTER ROLE app PASSWORD '{password}'"))
        .await
        .unwrap();
    let url = |pw: &str| {
        format!(
            "postgres://app:{pw}@127.0.0.1:{}/{}",
            cluster.port(),
            db.name()
        )
    };
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", url(password))
            .args(no_wait("q")),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    // A wrong one is the server's to refuse, and no piece of it is shown.
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", url("k3?Jd8Lq2=WRONG"))
            .args(no_wait("q")),
    )
    .await;
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("app:***@127.0.0.1"), "{}", out.stderr);
    assert!(
        !out.stderr.contains("Jd8") && !out.stderr.contains("WRONG"),
        "{}",
        out.stderr
    );
}

/// `sslpassword` (libpq's other secret), a password under a
/// percent-encoded name, a password's tail after an unencoded `/`: each
/// refused (exit 2) with the secret masked.
#[tokio::test]
async fn no_secret_of_any_spelling_is_printed() {
    for (url, secret) in [
        (
            "postgres://app@127.0.0.1:1/app?sslpassword=SECRET9",
            "SECRET9",
        ),
        ("host=127.0.0.1 sslpassword=SECRET9 dbname=app", "SECRET9"),
        (
            "postgres://app@127.0.0.1:1/app?pass%77ord=OTHERSECRET&port=abc",
            "OTHERSECRET",
        ),
        ("postgres://app:k3/x?Jd8Lq2=xYz@127.0.0.1:1/app", "Jd8Lq2"),
        ("postgres://app:se\ncretXYZ@127.0.0.1:1/app", "cretXYZ"),
    ] {
        let out = output(eventsource(None).args(["--database-url", url, "lock", "holders"])).await;
        assert_eq!(out.code, 2, "{url:?}: {out:?}");
        assert!(
            out.stderr
                .starts_with("eventsource: invalid connection settings"),
            "{url:?}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains(secret), "{url:?}: {}", out.stderr);
    }
}

/// `//postgres` is the database `/postgres` (libpq keeps what follows the
/// first `/`); it used to reach `postgres`.
#[tokio::test]
async fn a_double_slash_names_a_database_beginning_with_a_slash() {
    let db = database().await;
    let url = tcp_url(&db, &format!("/{}", db.name()));
    let out = run_with_url(&url, "slash").await;
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("database \"/{}\" does not exist", db.name())),
        "{}",
        out.stderr
    );
}

/// A line break in a URL used to be dropped silently (`postgres\nfoo`
/// reached `postgresfoo`); it is a usage error now.
#[tokio::test]
async fn a_url_with_a_tab_or_line_break_is_refused() {
    for url in [
        "postgres://app@127.0.0.1:1/postgres\nfoo",
        "postgres://app@127.0.0.1:1/postgres?application_name=a\tb",
    ] {
        let out = run_with_url(url, "k").await;
        assert_eq!(out.code, 2, "{url:?}: {out:?}");
        assert!(
            out.stderr.contains("the URL holds a tab or a line break"),
            "{url:?}: {}",
            out.stderr
        );
        // The URL shown escaped: one line, no raw tab.
        assert_eq!(out.stderr.lines().count(), 1, "{url:?}: {}", out.stderr);
        assert!(
            !out.stderr.contains('\t')
                && (out.stderr.contains("\\n") || out.stderr.contains("\\t")),
            "{url:?}: {}",
            out.stderr
        );
    }
}

/// `PGSERVICEFILE=/dev/zero` was read until memory ran out (1.87 GB in
/// 6 s); it is read up to 1 MiB and refused by name.
#[tokio::test]
async fn a_service_file_with_no_end_is_refused_by_name() {
    for file in ["/dev/zero", "/dev/urandom"] {
        let out = output(
            eventsource(None)
                .env("PGSERVICEFILE", file)
                .env("PGSERVICE", "svc")
                .args(["lock", "holders"]),
        )
        .await;
        assert_eq!(out.code, 2, "{file}: {out:?}");
        assert!(
            out.stderr
                .contains(&format!("service file \"{file}\" holds more than 1 MiB")),
            "{file}: {}",
            out.stderr
        );
    }
}

/// An unencoded `/` or `@` in a password: libpq reads the tail as a host
/// or a database name, and the tool printed it whole in `(database
/// postgres://root@plain:2024/SecretX@...)`. Refused now (exit 2), the
/// password masked.
#[tokio::test]
async fn an_at_sign_after_the_credentials_is_a_usage_error_printing_no_password() {
    for url in [
        "postgresql://plain:2024/SecretX@127.0.0.1:1/app",
        "postgresql://ua:a@SecretX@127.0.0.1:1/app",
        "postgresql://ua:pw@127.0.0.1:1,SecretX@127.0.0.1:1/app",
    ] {
        let out = run_with_url(url, "at").await;
        assert_eq!(out.code, 2, "{url}: {out:?}");
        assert!(
            out.stderr.contains("is written %40 or %2F"),
            "{url}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("SecretX"), "{url}: {}", out.stderr);
    }
}

/// `PGREQUIRESSL=1` and `requiressl=1` (libpq's deprecated spelling of
/// `sslmode=require`) were ignored and refused as unknown respectively: the
/// tool connected without TLS where psql says the server does not
/// support SSL.
#[tokio::test]
async fn requiressl_requires_tls_as_in_libpq() {
    let db = database().await;
    let url = tcp_url(&db, db.name());
    // The test server offers no TLS: without the setting the run works.
    let out = run_with_url(&url, "rssl").await;
    assert_eq!(out.code, 0, "{out:?}");
    for (url, requiressl) in [
        (url.clone(), Some("1")),
        (format!("{url}?requiressl=1"), None),
    ] {
        let mut cmd = eventsource(None);
        cmd.env("DATABASE_URL", &url).args(no_wait("rssl"));
        if let Some(v) = requiressl {
            cmd.env("PGREQUIRESSL", v);
        }
        let out = output(&mut cmd).await;
        assert_eq!(out.code, 69, "{url} {requiressl:?}: {out:?}");
        assert!(out.stderr.contains("does not offer TLS"), "{out:?}");
    }
}

/// `password=` (empty) was sent as the password; libpq takes it as none
/// and reads the password file (not PGPASSWORD: the parameter was given).
#[tokio::test]
async fn an_empty_password_reads_the_password_file() {
    let (cluster, db) = password_cluster().await;
    let password = "pgpass-Empty-Pw9";
    db.connect()
        .await
        .unwrap()
        .batch_execute(&format!("ALTER ROLE app PASSWORD '{password}'"))
        .await
        .unwrap();
    let dir = scratch_dir();
    let pgpass = dir.join("pgpass");
    std::fs::write(
        &pgpass,
        format!("127.0.0.1:{}:*:app:{password}\n", cluster.port()),
    )
    .unwrap();
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = cluster.port();
    for url in [
        format!(
            "host=127.0.0.1 port={port} user=app dbname={} password=",
            db.name()
        ),
        format!(
            "host=127.0.0.1 port={port} user=app dbname={} password=''",
            db.name()
        ),
        format!("postgresql://app@127.0.0.1:{port}/{}?password=", db.name()),
    ] {
        let out = output(
            eventsource(None)
                .env("DATABASE_URL", &url)
                .env("PGPASSFILE", &pgpass)
                .env("PGPASSWORD", "WRONG-env-pw")
                .args(no_wait("empty-pw")),
        )
        .await;
        assert_eq!(out.code, 0, "{url}: {out:?}");
    }
}

/// `user=''` with PGUSER set: libpq connects as the OS user; the tool sent
/// no user name ("no PostgreSQL user name specified in startup packet").
#[tokio::test]
async fn an_empty_user_name_is_the_os_users() {
    let os_user = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    let os_user = String::from_utf8(os_user.stdout).unwrap().trim().to_owned();
    let (cluster, db) = private_db(&[]).await;
    let admin = db.connect().await.unwrap();
    if os_user != "postgres" {
        admin
            .batch_execute(&format!("CREATE ROLE \"{os_user}\" LOGIN"))
            .await
            .unwrap();
    }
    let port = cluster.port();
    for url in [
        format!("host=127.0.0.1 port={port} dbname={} user=''", db.name()),
        format!("postgresql://127.0.0.1:{port}/{}?user=", db.name()),
    ] {
        let out = output(
            eventsource(None)
                .env("DATABASE_URL", &url)
                .env("PGUSER", "no-such-role-x")
                .args(["lock", "holders"]),
        )
        .await;
        assert_eq!(out.code, 0, "{url}: {out:?}");
    }
}

/// A service file that is not UTF-8 was skipped silently (the system
/// file's section taken instead); `[s1] # comment` was not found, where
/// libpq compares `[s1]` alone.
#[tokio::test]
async fn service_headers_with_comments_are_found_and_a_non_utf8_file_refused() {
    let db = database().await;
    let config = db.config();
    let dir = scratch_dir();
    let file = dir.join("services.conf");
    std::fs::write(
        &file,
        format!(
            "[s1] # the lock database\nhost=127.0.0.1\nport={}\nuser={}\ndbname={}\n",
            config.get_ports()[0],
            config.get_user().unwrap(),
            db.name()
        ),
    )
    .unwrap();
    let run = |file: &std::path::Path| {
        let mut cmd = eventsource(None);
        cmd.env("PGSERVICEFILE", file)
            .env("PGSYSCONFDIR", dir.join("sys"))
            .env("PGSERVICE", "s1")
            .args(no_wait("svc"));
        cmd
    };
    let out = output(&mut run(&file)).await;
    assert_eq!(out.code, 0, "{out:?}");
    let latin1 = dir.join("latin1.conf");
    std::fs::write(&latin1, b"[s1]\n# caf\xe9\nport=1\n").unwrap();
    std::fs::create_dir_all(dir.join("sys")).unwrap();
    std::fs::copy(&file, dir.join("sys/pg_service.conf")).unwrap();
    let out = output(&mut run(&latin1)).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "service file \"{}\", line 2, is not UTF-8",
            latin1.display()
        )),
        "{}",
        out.stderr
    );
}

/// More ports than hosts were taken (`port=56498,56431,1` for two hosts),
/// or failed only when connecting (exit 69, "invalid number of ports");
/// libpq refuses them: one port, or one for each host.
#[tokio::test]
async fn more_ports_than_hosts_is_a_usage_error() {
    for url in [
        "host=127.0.0.1,::1 port=56498,56431,1 dbname=app",
        "host=127.0.0.1 port=1,2 dbname=app",
        "postgresql://127.0.0.1/app?port=56431,,",
    ] {
        let out = run_with_url(url, "ports").await;
        assert_eq!(out.code, 2, "{url}: {out:?}");
        assert!(
            out.stderr.contains("port numbers to") && out.stderr.contains("hosts"),
            "{url}: {}",
            out.stderr
        );
    }
}
