//! `lock doctor`: passes on PostgreSQL, is not fooled by look-alike
//! functions (and warns about them), sizes the lock table, exit 69 when
//! unreachable.

use crate::common::*;

#[tokio::test]
async fn doctor_passes_on_postgres() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("ok:"), "{out:?}");
    assert!(out.stdout.contains("server version:"), "{out:?}");
    assert!(out.stdout.contains("idle_session_timeout"), "{out:?}");
    // Which server answered (with several hosts in the URL, which one).
    let port = db.config().get_ports().first().copied().unwrap_or(5432);
    let server = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("server: "))
        .unwrap_or_else(|| panic!("no server line: {out:?}"));
    assert!(
        server.contains(&format!(":{port}, up since ")) || server.starts_with("local:"),
        "{server}"
    );
}

#[tokio::test]
async fn doctor_is_not_fooled_by_look_alikes_earlier_in_search_path_and_warns() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE FUNCTION public.pg_advisory_lock(bigint) RETURNS void \
               LANGUAGE sql AS ''; \
             CREATE FUNCTION public.pg_try_advisory_lock(bigint) RETURNS boolean \
               LANGUAGE sql AS 'SELECT true'; \
             CREATE FUNCTION public.pg_advisory_unlock(bigint) RETURNS boolean \
               LANGUAGE sql AS 'SELECT true'; \
             ALTER DATABASE {} SET search_path = public, pg_catalog",
            db.name()
        ))
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("ok:"), "{out:?}");
    let warning = out
        .stdout
        .lines()
        .find(|l| l.contains("outside pg_catalog"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        warning.contains("public.pg_advisory_lock(bigint)"),
        "{warning}"
    );
    // Nor is `lock run`: a second run is excluded while the first holds.
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "first-of-two",
        "shadowed",
        "--",
        "sh",
        "-c",
        "echo entered; read x",
    ]));
    a.expect_line("entered").await;
    let b =
        output(eventsource(Some(&db)).args(["lock", "run", "--no-wait", "shadowed", "--", "true"]))
            .await;
    assert_eq!(b.code, 75, "{b:?}");
    a.send_line("done").await;
    assert_eq!(a.finish().await.code, 0);
}

#[tokio::test]
async fn doctor_sizes_the_lock_table_by_every_backend_slot_and_gives_no_budget_advice() {
    // 10 x (20 connections + 3 autovacuum workers + 1 launcher + 8 workers
    // + 10 WAL senders + 0 prepared): 420; a budget of 4096 would be over
    // half of it, but `lock run` takes one lock.
    let (_cluster, db) = private_db(&[
        ("max_connections", "20"),
        ("max_locks_per_transaction", "10"),
    ])
    .await;
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("sized for 420 locks"), "{}", out.stdout);
    assert!(!out.stdout.contains("budget"), "{}", out.stdout);
}

#[tokio::test]
async fn doctor_on_an_unreachable_server_exits_69_without_the_password() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let out = output(
        eventsource(None)
            .args(["lock", "doctor", "--database-url"])
            .arg(format!("postgres://u:doctor-secret-77@127.0.0.1:{port}/x")),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(!out.stderr.contains("doctor-secret-77"), "{out:?}");
    assert!(out.stderr.contains("cannot check the database"), "{out:?}");
}

#[tokio::test]
async fn doctor_warns_when_the_lease_is_shorter_than_the_watchdog_needs() {
    let (_cluster, db) = private_db(&[("idle_session_timeout", "2s")]).await;
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let warning = out
        .stdout
        .lines()
        .find(|l| l.contains("for lock run"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        warning.contains("2000 ms") && warning.contains("--watchdog"),
        "{warning}"
    );
    let (_cluster, db) = private_db(&[("idle_session_timeout", "5s")]).await;
    let out = output(eventsource(Some(&db)).args(["lock", "doctor"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("for lock run"), "{}", out.stdout);
}

#[tokio::test]
async fn doctor_works_under_a_roles_short_statement_timeout() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    // A role of its own: ALTER ROLE on the shared cluster's superuser would
    // reach every other test.
    let role = format!("doctor_{}", db.name());
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; ALTER ROLE {role} SET statement_timeout = '50ms'"
        ))
        .await
        .unwrap();
    let mut config = db.config();
    config.user(&role);
    let (client, conn) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let timeout: String = client
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        timeout, "50ms",
        "the role's setting applies to its sessions"
    );
    drop(client);
    let user_part = format!("{}@", config.get_user().unwrap());
    let url = db.url().replacen("postgres@", &user_part, 1);
    assert!(url.contains(&user_part), "{url}");
    let out = output(
        eventsource(None)
            .env("DATABASE_URL", &url)
            .args(["lock", "doctor"]),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with("ok:"), "{out:?}");
    let _ = admin.batch_execute(&format!("DROP ROLE {role}")).await;
}
