//! `PostgresLockManager::verify()` on a real server: a plain PostgreSQL
//! passes; one whose advisory functions do nothing is caught.
#![cfg(feature = "postgres")]

mod common;
mod fault_support;

use eventsource::adapters::postgres::{PostgresLockManager, VerifyProblem};
use eventsource::BackendErrorKind;
use eventsource::{DistributedLock, LockRegistry};

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
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_op_advisory_functions_are_caught() {
    // Shadow the advisory functions with ones that lock nothing, as an
    // engine with no-op advisory locks would behave: pg_catalog listed
    // after the schema is searched after it.
    let (_cluster, db) = fault_support::private_db(&[]).await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA fake; \
             CREATE FUNCTION fake.pg_try_advisory_lock(bigint) RETURNS boolean \
               LANGUAGE sql AS 'SELECT true'; \
             CREATE FUNCTION fake.pg_advisory_unlock(bigint) RETURNS boolean \
               LANGUAGE sql AS 'SELECT true'; \
             ALTER DATABASE {} SET search_path = fake, pg_catalog, public",
            db.name()
        ))
        .await
        .unwrap();
    let m = common::manager(&db, "not-fooled");
    // The manager itself is not fooled: it calls pg_catalog's functions,
    // so a second manager is excluded.
    let other = common::manager(&db, "not-fooled-either");
    let _g = m.acquire("k", None).await.unwrap();
    assert!(other.try_acquire("k").await.unwrap().is_none());
    // verify() is not.
    let err = m.verify().await.unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), BackendErrorKind::NotPostgres);
    assert!(err.to_string().contains("do nothing"), "{err}");
    let problem = std::error::Error::source(backend)
        .and_then(|s| s.downcast_ref::<VerifyProblem>())
        .expect("a VerifyProblem source");
    assert_eq!(problem, &VerifyProblem::LockNotRecorded);
}

#[tokio::test]
async fn unreachable_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let m = PostgresLockManager::from_url(&format!("postgres://u@127.0.0.1:{port}/x")).unwrap();
    let err = m.verify().await.unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Connect)
    );
}
