//! A lock manager pointed at a hot standby: advisory locks there exclude
//! only the standby's own sessions, never holders on the primary, so the
//! manager refuses with a typed error unless told to allow it.

use crate::fault_support;

use std::sync::Arc;
use std::time::Duration;

use pgcoord::PostgresLockManager;
use pgcoord::{
    error::{AcquireFailure, BackendErrorKind},
    DistributedLock, LockRegistry,
};
use pgcoord_testkit::pg::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_is_refused_unless_allowed() {
    let (primary, db) = fault_support::private_db(&[]).await;
    let p = primary.clone();
    let standby = tokio::task::spawn_blocking(move || p.start_standby())
        .await
        .unwrap()
        .expect("a standby");
    let standby = Arc::new(standby);
    // The database exists on the standby too, once replayed.
    let url = format!("{}?sslmode=disable", standby.url(db.name()));
    let config: tokio_postgres::Config = url.parse().unwrap();
    pgcoord_testkit::locks::eventually_async("the standby serves the database", || {
        let config = config.clone();
        async move {
            match config.connect(tokio_postgres::NoTls).await {
                Ok((client, conn)) => {
                    tokio::spawn(conn);
                    client
                        .query_one("SELECT pg_is_in_recovery()", &[])
                        .await
                        .is_ok_and(|r| r.get::<_, bool>(0))
                }
                Err(_) => false,
            }
        }
    })
    .await;

    let refused = PostgresLockManager::builder(config.clone().into())
        .holder_id("on-standby")
        .build()
        .unwrap();
    for timeout in [None, Some(Duration::ZERO), Some(Duration::from_secs(5))] {
        let err = refused.acquire("k", timeout).await.unwrap_err();
        assert!(
            matches!(
                err.as_lock_acquisition().map(|e| &e.reason),
                Some(AcquireFailure::Backend(b)) if b.kind() == BackendErrorKind::Standby
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("standby"), "{err}");
        assert!(!err.is_timeout());
    }
    assert!(refused
        .try_lock("k")
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .is_err());
    assert_eq!(refused.held_lock_count(), 0);

    // Allowed: it locks (among the standby's own sessions only).
    let allowed = PostgresLockManager::builder(config.into())
        .holder_id("on-standby-allowed")
        .allow_standby(true)
        .build()
        .unwrap();
    let g = allowed
        .acquire("k", Some(Duration::from_secs(5)))
        .await
        .unwrap();
    g.release().await.unwrap();
    allowed.close().await.unwrap();
    drop::<TestDatabase>(db);
}
