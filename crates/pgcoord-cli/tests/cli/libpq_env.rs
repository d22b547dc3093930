//! libpq's conventions on the real binary: the `PG*` variables alone (no
//! `DATABASE_URL`), the URL over them, a password file (0600 and 0644),
//! a service file, and passwords from anywhere never printed.
//!
//! Which database a run reached is proved by a conflict: a lock held in
//! the test's database makes a `--no-wait` run there exit 75 (advisory
//! locks are per database), and a run elsewhere would succeed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::{TestCluster, TestDatabase};

use crate::common::*;

const PASSWORD: &str = "pgpass-S3cret-pw";

/// Holds `key` in `db` on a session of its own; the session is returned.
async fn hold(db: &TestDatabase, key: &str) -> tokio_postgres::Client {
    let holder = session(db, "eventsource/env-holder").await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key(key)])
        .await
        .unwrap();
    holder
}

fn no_wait(key: &str) -> [&str; 6] {
    ["lock", "run", "--no-wait", key, "--", "true"]
}

fn write_file(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A private cluster where role `app` must give its password (SCRAM) over
/// TCP, and a database on it.
pub async fn password_cluster() -> (std::sync::Arc<TestCluster>, TestDatabase) {
    let (cluster, db) = private_db(&[]).await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!("CREATE ROLE app LOGIN PASSWORD '{PASSWORD}'"))
        .await
        .unwrap();
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.set_hba(
            "local all all trust\n\
             host all postgres 127.0.0.1/32 trust\n\
             host all all 127.0.0.1/32 scram-sha-256\n",
        )
    })
    .await
    .unwrap()
    .unwrap();
    (cluster, db)
}

#[tokio::test]
async fn pg_variables_alone_reach_the_server() {
    let db = database().await;
    let config = db.config();
    let port = config.get_ports()[0].to_string();
    let _holder = hold(&db, "env-only").await;
    let env_run = |key: &str| {
        let mut cmd = eventsource(None);
        cmd.env("PGHOST", "127.0.0.1")
            .env("PGPORT", &port)
            .env("PGUSER", config.get_user().unwrap())
            .env("PGDATABASE", db.name())
            .env("PGAPPNAME", "nightly-report")
            .env("PGCONNECT_TIMEOUT", "5")
            .env("PGSSLMODE", "disable")
            .args(no_wait(key));
        cmd
    };
    let out = output(&mut env_run("env-only")).await;
    assert_eq!(out.code, 75, "held in the PGDATABASE database: {out:?}");
    assert!(out.stderr.contains("env-holder"), "{}", out.stderr);
    let out = output(&mut env_run("env-free")).await;
    assert_eq!(out.code, 0, "{out:?}");
}

/// A restriction libpq would enforce from the environment, and this client
/// cannot, stops the tool with a usage error naming the variable, before
/// any connection: it is never dropped silently.
#[tokio::test]
async fn a_libpq_restriction_the_tool_cannot_honour_is_a_usage_error() {
    let db = database().await;
    for (var, value) in [
        ("PGREQUIREAUTH", "scram-sha-256"),
        ("PGSSLCERTMODE", "disable"),
    ] {
        let out = output(
            eventsource(Some(&db))
                .env(var, value)
                .args(no_wait("restricted")),
        )
        .await;
        assert_eq!(out.code, 2, "{var}: {out:?}");
        assert!(
            out.stderr.contains(&format!("{var} is set")),
            "{var}: {out:?}"
        );
        assert!(out.stderr.contains("not supported"), "{var}: {out:?}");
    }
}

#[tokio::test]
async fn the_url_wins_over_pg_variables_and_they_fill_its_gaps() {
    let db = database().await;
    let config = db.config();
    let port = config.get_ports()[0];
    let _holder = hold(&db, "url-first").await;
    // Everything in the URL: the variables (a wrong port and database) lose.
    let out = output(
        eventsource(Some(&db))
            .env("PGPORT", "1")
            .env("PGDATABASE", "no_such_database")
            .args(no_wait("url-first")),
    )
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    // A URL without a database: PGDATABASE names it.
    let url = format!("postgres://{}@127.0.0.1:{port}", config.get_user().unwrap());
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .env("PGDATABASE", db.name())
            .args(no_wait("url-first")),
    )
    .await;
    assert_eq!(out.code, 75, "{out:?}");
}

#[tokio::test]
async fn a_password_file_gives_the_password_unless_others_may_read_it() {
    let (cluster, db) = password_cluster().await;
    let dir = scratch_dir();
    let pgpass = dir.join("pgpass");
    write_file(
        &pgpass,
        &format!("127.0.0.1:{}:*:app:{PASSWORD}\n", cluster.port()),
        0o600,
    );
    let url = format!("postgres://app@127.0.0.1:{}/{}", cluster.port(), db.name());
    let run = |pgpass: &Path| {
        let mut cmd = eventsource(None);
        cmd.env("DATABASE_URL", &url)
            .env("PGPASSFILE", pgpass)
            .args(no_wait("pgpass"));
        cmd
    };
    let out = output(&mut run(&pgpass)).await;
    assert_eq!(
        out.code, 0,
        "a URL without a password, and PGPASSFILE: {out:?}"
    );
    assert!(out.stderr.is_empty(), "{}", out.stderr);

    // ~/.pgpass when PGPASSFILE is not set, with the PG* variables alone.
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::copy(&pgpass, home.join(".pgpass")).unwrap();
    let out = output(
        eventsource(None)
            .env_remove("PGPASSFILE")
            .env("HOME", &home)
            .env("PGHOST", "127.0.0.1")
            .env("PGPORT", cluster.port().to_string())
            .env("PGUSER", "app")
            .env("PGDATABASE", db.name())
            .args(no_wait("pgpass")),
    )
    .await;
    assert_eq!(out.code, 0, "~/.pgpass: {out:?}");

    // Readable by others: ignored, with libpq's warning; the server then
    // asks for a password nobody gave.
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = output(&mut run(&pgpass)).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr.contains("group or world access") && out.stderr.contains("0600"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("group or world access").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .starts_with("eventsource: warning: password file"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("PGPASSWORD"),
        "the hint says where a password goes: {}",
        out.stderr
    );
    assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);

    // A wrong password in the file: the hint names the file, no password shown.
    write_file(&pgpass, &format!("*:*:*:app:{PASSWORD}-wrong\n"), 0o600);
    let out = output(&mut run(&pgpass)).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "check the user name and the password in {}",
            pgpass.display()
        )),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);
}

#[tokio::test]
async fn a_service_file_names_the_server() {
    let (cluster, db) = password_cluster().await;
    let _holder = hold(&db, "service").await;
    let dir = scratch_dir();
    let services = dir.join("pg_service.conf");
    write_file(
        &services,
        &format!(
            "[other]\nhost=elsewhere\n\n[ops]\nhost=127.0.0.1\nport={}\nuser=app\ndbname={}\npassword={PASSWORD}\n",
            cluster.port(),
            db.name()
        ),
        0o644,
    );
    let out = output(
        eventsource(None)
            .env("PGSERVICEFILE", &services)
            .env("PGSERVICE", "ops")
            .args(no_wait("service")),
    )
    .await;
    assert_eq!(out.code, 75, "PGSERVICE: {out:?}");
    assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);
    // The service named in a key=value string, and a string value over it.
    let out = output(
        eventsource(None)
            .env("PGSERVICEFILE", &services)
            .env("DATABASE_URL", "service=ops dbname=postgres")
            .args(no_wait("service")),
    )
    .await;
    assert_eq!(out.code, 0, "another database: {out:?}");
    let out = output(
        eventsource(None)
            .env("PGSERVICEFILE", &services)
            .env("PGSERVICE", "missing")
            .args(no_wait("service")),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains("definition of service \"missing\" not found"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn passwords_from_anywhere_never_appear() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // libpq allows spaces around `=`; the password is masked all the same.
    for url in [
        format!("host=127.0.0.1 port={port} user=app password = hunter2spaced dbname=x"),
        format!("host=127.0.0.1 port={port} user=app password= 'hunter2spaced' dbname=x"),
    ] {
        let out = output(
            eventsource(None)
                .env("DATABASE_URL", &url)
                .args(no_wait("k")),
        )
        .await;
        assert_eq!(out.code, 69, "{out:?}");
        assert!(!out.stderr.contains("hunter2spaced"), "{}", out.stderr);
        assert!(out.stderr.contains("app:***@127.0.0.1"), "{}", out.stderr);
    }
    // PGPASSWORD with an unreachable server, and with a bad parameter.
    let out = output(
        eventsource(None)
            .env("PGHOST", "127.0.0.1")
            .env("PGPORT", port.to_string())
            .env("PGUSER", "app")
            .env("PGPASSWORD", "hunter2env")
            .args(no_wait("k")),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(out.stderr.contains("PG* environment"), "{}", out.stderr);
    assert!(!out.stderr.contains("hunter2env"), "{}", out.stderr);
    // target_session_attrs: libpq 14's values are accepted, a bad one is
    // named.
    let out = output(
        eventsource(None)
            .env(
                "DATABASE_URL",
                format!(
                    "postgres://app:hunter2url@127.0.0.1:{port}/x?target_session_attrs=primary"
                ),
            )
            .args(no_wait("k")),
    )
    .await;
    assert_eq!(out.code, 69, "parsed, then unreachable: {out:?}");
    let out = output(
        eventsource(None)
            .env(
                "DATABASE_URL",
                format!("postgres://app:hunter2url@127.0.0.1:{port}/x?target_session_attrs=master"),
            )
            .args(no_wait("k")),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("`target_session_attrs`"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2url"), "{}", out.stderr);
}

#[tokio::test]
async fn pgappname_names_the_inspection_session() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    let watch = Running::start(
        eventsource(Some(&db))
            .env("PGAPPNAME", "nightly-report")
            .args(["lock", "holders", "--watch", "--interval", "100ms"]),
    );
    // No event says a session opened: poll pg_stat_activity, bounded.
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let n: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name = 'nightly-report'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if n == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no session named by PGAPPNAME"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    watch.signal(nix::sys::signal::Signal::SIGTERM);
    let out = watch.finish().await;
    assert!(!out.stderr.contains("error"), "{out:?}");
}

#[tokio::test]
async fn pgconnect_timeout_bounds_the_connection() {
    // A server that accepts and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    // Every command's own session keeps to it, not to the tool's default.
    for args in [
        vec!["lock", "holders"],
        vec!["leader", "show", "nightly"],
        vec![
            "lock",
            "run",
            "--min-interval",
            "1h",
            "nightly",
            "--",
            "true",
        ],
    ] {
        let out = output(
            eventsource(None)
                .env("PGHOST", "127.0.0.1")
                .env("PGPORT", port.to_string())
                .env("PGUSER", "app")
                .env("PGCONNECT_TIMEOUT", "1")
                .args(&args),
        )
        .await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("no answer within 1s"),
            "{args:?}: {}",
            out.stderr
        );
    }
    silent.abort();
}
