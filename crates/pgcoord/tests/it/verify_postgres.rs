//! `PostgresLockManager::verify()` on a real server: a plain PostgreSQL
//! passes; one whose advisory functions do nothing is caught.

use crate::common;
use crate::fault_support;

use pgcoord::error::BackendErrorKind;
use pgcoord::PostgresLockManager;
use pgcoord::{DistributedLock, LockRegistry};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_postgres_passes_and_reports_its_settings() {
    let db = common::shared_db().await;
    let m = common::manager(db, "verify");
    let report = m.verify().await.unwrap();
    assert_ne!(report.session_pids.0, report.session_pids.1);
    assert!(
        report.server_version.starts_with(char::is_numeric),
        "{report:?}"
    );
    assert!(report.lock_table_capacity.unwrap() > 0);
    assert!(report
        .settings
        .iter()
        .any(|(n, _)| n == "idle_session_timeout"));
    let text = report.to_string();
    assert!(text.starts_with("ok:"), "{text}");
    // Nothing left behind.
    assert_eq!(m.session_count(), 0);
    assert_eq!(m.held_lock_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recommended_settings_draw_no_warning_and_defaults_do() {
    let (_cluster, db) = fault_support::private_db(&[
        ("idle_session_timeout", "30s"),
        ("tcp_keepalives_idle", "5"),
        ("tcp_keepalives_interval", "1"),
        ("tcp_keepalives_count", "3"),
    ])
    .await;
    let report = common::manager(&db, "verify").verify().await.unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let (_cluster, db) = fault_support::private_db(&[]).await;
    let report = common::manager(&db, "verify").verify().await.unwrap();
    // Only the lease: the manager's sessions lower the TCP timeouts
    // themselves.
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("idle_session_timeout"),
        "{:?}",
        report.warnings
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn look_alike_functions_earlier_in_search_path_do_not_fool_verify_and_are_reported() {
    // No-op look-alikes of every advisory function, the blocking wait
    // included, found before pg_catalog. verify() calls pg_catalog's own,
    // so it passes, and it warns about the look-alikes, which fool any
    // client that calls the functions unqualified.
    let (_cluster, db) = fault_support::private_db(&[]).await;
    let admin = db.connect().await.unwrap();
    let mut sql = String::new();
    for f in [
        "pg_try_advisory_lock",
        "pg_advisory_unlock",
        "pg_try_advisory_lock_shared",
        "pg_advisory_unlock_shared",
    ] {
        sql.push_str(&format!(
            "CREATE FUNCTION public.{f}(bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true'; "
        ));
    }
    for f in ["pg_advisory_lock", "pg_advisory_lock_shared"] {
        sql.push_str(&format!(
            "CREATE FUNCTION public.{f}(bigint) RETURNS void LANGUAGE sql AS ''; "
        ));
    }
    sql.push_str(
        "CREATE FUNCTION public.pg_advisory_unlock_all() RETURNS void LANGUAGE sql AS ''; ",
    );
    sql.push_str(&format!(
        "ALTER DATABASE {} SET search_path = public, pg_catalog",
        db.name()
    ));
    admin.batch_execute(&sql).await.unwrap();
    // The look-alikes are what an unqualified call gets on a new session.
    let probe = db.connect().await.unwrap();
    let other = db.connect().await.unwrap();
    probe
        .execute("SELECT pg_advisory_lock(42)", &[])
        .await
        .unwrap();
    let fooled: bool = other
        .query_one("SELECT pg_try_advisory_lock(42)", &[])
        .await
        .unwrap()
        .get(0);
    assert!(fooled, "the look-alikes are in effect");

    // The lock managers are not fooled: they call pg_catalog's functions.
    let m = common::manager(&db, "not-fooled");
    let other = common::manager(&db, "not-fooled-either");
    let _g = m.acquire("k", None).await.unwrap();
    assert!(other
        .try_lock("k")
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());

    let report = common::manager(&db, "verify").verify().await.unwrap();
    let warning = report
        .warnings
        .iter()
        .find(|w| w.contains("outside pg_catalog"))
        .unwrap_or_else(|| panic!("{:?}", report.warnings));
    for f in [
        "public.pg_advisory_lock(bigint)",
        "public.pg_try_advisory_lock(bigint)",
        "public.pg_advisory_unlock_all()",
    ] {
        assert!(warning.contains(f), "{warning}");
    }
}

#[tokio::test]
async fn unreachable_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let m = format!("postgres://u@127.0.0.1:{port}/x")
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let err = m.verify().await.unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Connect)
    );
}

/// A second fence table in another schema (a hand-made one, earlier in some
/// session's search_path) hands that session tokens from its own counters:
/// verify() names both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_fence_table_is_reported() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let m = common::manager(&db, "verify-fences");
    m.install_fencing().await.unwrap();
    let report = m.verify().await.unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("fence tables")),
        "one table is no problem: {:?}",
        report.warnings
    );
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(
            "CREATE SCHEMA shadow; CREATE TABLE shadow.eventsource_lock_fences \
             (lock_id bigint primary key, key text not null, fence bigint not null, \
             last_run_started timestamptz)",
        )
        .await
        .unwrap();
    let report = m.verify().await.unwrap();
    let warning = report
        .warnings
        .iter()
        .find(|w| w.contains("fence tables"))
        .unwrap_or_else(|| panic!("{:?}", report.warnings));
    assert!(
        warning.starts_with("2 fence tables")
            && warning.contains("public.eventsource_lock_fences")
            && warning.contains("shadow.eventsource_lock_fences"),
        "{warning}"
    );
}
