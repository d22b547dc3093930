//! Shared helpers of the PostgreSQL integration tests.
#![allow(dead_code)]

use pgcoord::adapters::postgres::PostgresLockManager;
use pgcoord_testkit::pg::TestDatabase;
use tokio::sync::OnceCell;

/// One database for the tests of this binary that need no isolation of
/// their own (keys are unique per test).
pub async fn shared_db() -> &'static TestDatabase {
    static DB: OnceCell<TestDatabase> = OnceCell::const_new();
    DB.get_or_init(|| async { TestDatabase::create().await.expect("test database") })
        .await
}

pub fn manager(db: &TestDatabase, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(db.config())
        .holder_id(holder)
        .build()
}

/// Rows in pg_locks for an advisory lock id: (granted, waiting).
pub async fn lock_rows(client: &tokio_postgres::Client, lock_id: i64) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) \
             FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&lock_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Waits until `n` sessions wait for `lock_id` (a server-side signal).
pub async fn wait_for_waiters(client: &tokio_postgres::Client, lock_id: i64, n: i64) {
    pgcoord_testkit::locks::eventually_async("waiters queued", || async {
        lock_rows(client, lock_id).await.1 >= n
    })
    .await;
}

/// `pg_terminate_backend(pid)`, asserting it found the backend.
pub async fn terminate(client: &tokio_postgres::Client, pid: i32) {
    let ok: bool = client
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(ok, "could not terminate backend {pid}");
}

/// A plain connection to `url` (its connection task spawned).
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
    tokio::spawn(conn);
    client
}
