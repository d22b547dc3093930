//! A server whose certificate is X.509 version 1 (`tests/fixtures/tls-v1`,
//! what `openssl x509 -req` without `-extfile` makes, as PostgreSQL's
//! documentation signs certificates). libpq's `prefer` and `require`
//! (without a root file) check no certificate, so they connect, over TLS
//! 1.3 and 1.2, SCRAM bound to the channel; the verifying modes refuse it
//! at once, saying why and what to do (webpki cannot check a version 1
//! certificate).

use std::path::PathBuf;
use std::time::Duration;

use pgcoord::error::BackendErrorKind;
use pgcoord::{DistributedLock, LockRegistry, PostgresLockManager};
use pgcoord_testkit::pg::TestDatabase;

use crate::tls_support::cluster_serving;

const SECS: Duration = Duration::from_secs(30);
const SERVER: &str = include_str!("../fixtures/tls-v1/server-v1.crt");
const SERVER_KEY: &str = include_str!("../fixtures/tls-v1/server-v1.key");

/// The CA that signed the server's certificate (itself version 3).
fn ca_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls-v1/ca.crt")
}

fn url(db: &TestDatabase, port: u16, user: &str, params: &str) -> String {
    format!("postgres://{user}@localhost:{port}/{}?{params}", db.name())
}

/// Takes and releases a lock through `url` as holder `holder`, and gives
/// the TLS version of its session as the server saw it (`None`: no TLS).
async fn lock_over(url: &str, holder: &str, db: &TestDatabase) -> Option<String> {
    let m = url
        .parse()
        .map(PostgresLockManager::builder)
        .unwrap()
        .holder_id(holder)
        .build()
        .unwrap();
    let g = m
        .acquire("v1-key", Some(SECS))
        .await
        .unwrap_or_else(|e| panic!("{holder}: {e}"));
    let row = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT max(s.version) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = $1",
            &[&format!("eventsource/{holder}")],
        )
        .await
        .unwrap();
    g.release().await.unwrap();
    m.close().await.unwrap();
    row.get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_server_certificate_serves_the_modes_that_check_no_certificate() {
    let (cluster, db) = cluster_serving(SERVER.to_owned(), SERVER_KEY.to_owned()).await;
    let port = cluster.port();
    let version = lock_over(&url(&db, port, "app", "sslmode=require"), "require", &db).await;
    assert_eq!(version.as_deref(), Some("TLSv1.3"));
    // TLS 1.2 signs the handshake in another way: checked against the
    // certificate's key all the same.
    let tls12 = url(
        &db,
        port,
        "app",
        "sslmode=require&ssl_max_protocol_version=TLSv1.2",
    );
    let version = lock_over(&tls12, "require-1.2", &db).await;
    assert_eq!(version.as_deref(), Some("TLSv1.2"));
    let version = lock_over(&url(&db, port, "app", "sslmode=prefer"), "prefer", &db).await;
    assert_eq!(version.as_deref(), Some("TLSv1.3"));
    // SCRAM binds to a hash of the version 1 certificate, as the server
    // computes it: a login `channel_binding=require` accepts.
    let scram = url(
        &db,
        port,
        "scram_app:scram-secret",
        "sslmode=require&channel_binding=require",
    );
    let version = lock_over(&scram, "bound", &db).await;
    assert_eq!(version.as_deref(), Some("TLSv1.3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verifying_modes_refuse_a_version_1_server_certificate_saying_what_to_do() {
    let (cluster, db) = cluster_serving(SERVER.to_owned(), SERVER_KEY.to_owned()).await;
    let ca = ca_file().display().to_string();
    for (mode, checked) in [
        (
            "verify-full",
            "sslmode=verify-full checks it against sslrootcert",
        ),
        (
            "verify-ca",
            "sslmode=verify-ca checks it against sslrootcert",
        ),
        // As libpq: `require` checks the chain when there is a root file.
        (
            "require",
            "sslmode=require checks the chain because there is a root file",
        ),
    ] {
        let url = url(
            &db,
            cluster.port(),
            "app",
            &format!("sslmode={mode}&sslrootcert={ca}"),
        );
        let m = url
            .parse()
            .map(PostgresLockManager::builder)
            .unwrap()
            .build()
            .unwrap();
        let err = m.acquire("v1-key", Some(SECS)).await.unwrap_err();
        let backend = err
            .as_backend()
            .unwrap_or_else(|| panic!("{mode}: {err:?}"));
        assert_eq!(backend.kind(), BackendErrorKind::Tls, "{mode}: {err:?}");
        let msg = backend.message();
        for part in [
            "the server's certificate was refused: it is an X.509 version 1 certificate",
            checked,
            "reissue it as version 3",
            "subjectAltName=DNS:localhost",
            "sslmode=require and no root file",
        ] {
            assert!(msg.contains(part), "{mode}: {part:?} missing: {msg}");
        }
        assert!(!msg.contains("UnsupportedCertVersion"), "{msg}");
        assert_eq!(m.held_lock_count(), 0);
        m.close().await.unwrap();
    }
}
