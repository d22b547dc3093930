//! One connection story: the URL a lock manager takes, TLS parameters
//! included, is the URL the read-model pool and the connection factory take,
//! and all of them connect over the same verified TLS.

use crate::tls_support;

use std::time::Duration;

use pgcoord::readmodels::{connect, schema, Database, Dialect};
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord::{error::BackendErrorKind, DistributedLock};
use pgcoord::{readmodels::postgres::PostgresDatabase, PostgresLockManager};
use pgcoord_testkit::readmodels::ConformanceItem as Item;
use tls_support::setup;

const SECS: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_and_read_models_share_one_url_and_its_tls() {
    let s = setup().await;
    let url = s.url(
        "localhost",
        s.cluster.port(),
        &format!(
            "sslmode=verify-full&sslrootcert={}&application_name=rm-tls",
            s.ca_file.display()
        ),
    );

    let locks = url
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let guard = locks.acquire("rm-tls", Some(SECS)).await.unwrap();

    // Role `app` may not create tables in `public`: the schema is made as
    // the owner and granted.
    let admin = s.db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "{} GRANT ALL ON conformance_items TO app;",
            schema::full_schema::<Item>(Dialect::Postgres)
        ))
        .await
        .unwrap();

    let pool = PostgresDatabase::connect(&url).await.unwrap();
    let repo = pool.repository::<Item>();
    repo.save(&Item::new("over tls")).await.unwrap();
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 1);

    let Database::Postgres(factory) = connect(&url).await.unwrap() else {
        panic!("a postgres URL gave another backend");
    };
    assert_eq!(
        factory
            .repository::<Item>()
            .count(&Query::new())
            .await
            .unwrap(),
        1
    );

    // Every session of role `app` (the pool's, the factory's, the lock
    // manager's) runs TLS on the server's side; `app` cannot connect
    // without it anyway (hostnossl ... reject).
    let rows = admin
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.usename = 'app'",
            &[],
        )
        .await
        .unwrap();
    assert!(rows.len() >= 3, "{} sessions of app", rows.len());
    assert!(
        rows.iter().all(|r| r.get::<_, bool>(0)),
        "a session without TLS"
    );
    guard.release().await.unwrap();
    locks.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_model_pool_checks_certificates_as_the_locks_do() {
    let s = setup().await;
    let port = s.cluster.port();
    let fails = |url: String, what: &'static str| async move {
        let expected = match what {
            "disable" => BackendErrorKind::Connect,
            _ => BackendErrorKind::Tls,
        };
        let err = tokio::time::timeout(SECS, PostgresDatabase::connect(&url))
            .await
            .unwrap_or_else(|_| panic!("{what}: hung"))
            .unwrap_err();
        let kind = err.as_backend().map(|b| b.kind());
        assert_eq!(kind, Some(expected), "{what}: {err:?}");
        err.to_string()
    };
    let wrong = s.wrong_ca_file.display().to_string();
    let ca = s.ca_file.display().to_string();
    let msg = fails(
        s.url(
            "localhost",
            port,
            &format!("sslmode=verify-full&sslrootcert={wrong}"),
        ),
        "wrong CA",
    )
    .await;
    assert!(msg.contains("certificate"), "{msg}");
    let msg = fails(
        s.url(
            "127.0.0.1",
            port,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        "wrong host name",
    )
    .await;
    assert!(msg.contains("certificate"), "{msg}");
    let msg = fails(s.url("127.0.0.1", port, "sslmode=disable"), "disable").await;
    assert!(msg.contains("28000"), "{msg}");
    let missing = s.dir.join("missing.crt");
    let msg = fails(
        s.url(
            "localhost",
            port,
            &format!("sslmode=verify-full&sslrootcert={}", missing.display()),
        ),
        "missing root file",
    )
    .await;
    assert!(msg.contains("missing.crt"), "{msg}");
    // verify-ca checks the chain, not the name.
    PostgresDatabase::connect(&s.url(
        "127.0.0.1",
        port,
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    ))
    .await
    .unwrap();
}
