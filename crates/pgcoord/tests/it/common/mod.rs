//! Shared helpers of the PostgreSQL integration tests.
#![allow(dead_code)]

use pgcoord::PostgresLockManager;
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
    PostgresLockManager::builder(db.config().into())
        .holder_id(holder)
        .build()
        .unwrap()
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

/// The arguments that run this test binary again as a child process on
/// exactly one `#[ignore]`d worker test: `module` is the caller's
/// `module_path!()`, `worker` the name of the worker's test function. Checks
/// first that the binary has that test, so that a renamed or moved worker
/// is an error here rather than a child that runs no test and exits 0.
pub fn worker_args(module: &str, worker: &str) -> [String; 4] {
    // Test names leave out the crate (`it::`).
    let name = match module.split_once("::") {
        Some((_, path)) => format!("{path}::{worker}"),
        None => worker.to_owned(),
    };
    static FOUND: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    if !found.contains(&name) {
        let exe = std::env::current_exe().expect("the test binary's path");
        let listed = std::process::Command::new(&exe)
            .args([&name, "--exact", "--ignored", "--list", "--format=terse"])
            .output()
            .expect("list the worker test");
        let listing = String::from_utf8_lossy(&listed.stdout);
        assert!(
            listing.lines().any(|l| l == format!("{name}: test")),
            "{} has no ignored test {name}: {listing}",
            exe.display()
        );
        found.push(name.clone());
    }
    drop(found);
    [
        name,
        "--exact".into(),
        "--ignored".into(),
        "--test-threads=1".into(),
    ]
}
