//! A batch that fails part-way: session locks survive a statement's error,
//! so the manager must reconcile with `pg_locks` rather than assume.
//! Provoked by filling a deliberately tiny server lock table (private cluster).

use std::sync::Arc;

use pgcoord::PostgresLockManager;
use pgcoord::{DistributedLock, LockRegistry};
use pgcoord_testkit::pg::{ClusterOptions, TestCluster, TestDatabase};

/// Granted advisory locks in database `db_oid`. Reads only `pg_locks` (whose
/// relation lock takes a fast-path slot): with the shared lock table full,
/// a query touching the shared catalog `pg_database` would fail too.
async fn granted_advisory(client: &tokio_postgres::Client, db_oid: i64) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND database::int8 = $1",
            &[&db_oid],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_failing_part_way_is_reconciled_with_the_server() {
    let cluster = TestCluster::start_with(ClusterOptions {
        settings: vec![
            ("max_connections".into(), "20".into()),
            ("max_locks_per_transaction".into(), "10".into()),
        ],
    })
    .unwrap();
    let db = TestDatabase::create_on(Arc::new(cluster)).await.unwrap();
    // Opened before the lock table fills up (new sessions then fail).
    let observer = db.connect().await.unwrap();
    let db_oid: i64 = observer
        .query_one(
            "SELECT oid::int8 FROM pg_database WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(granted_advisory(&observer, db_oid).await, 0);
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("overflow")
        .batched_sessions(1)
        .max_held_locks(100_000)
        .build()
        .unwrap();

    // Many concurrent try-locks, so they travel in large batches; the
    // shared lock table overflows in the middle of one of them.
    let mut tasks = Vec::new();
    for t in 0..50 {
        let m = m.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (0usize, 0usize);
            for i in 0..200 {
                match m
                    .try_lock(&format!("overflow-{t}-{i}"))
                    .await
                    .map(|g| g.map(pgcoord::LockGuard::into_manual))
                {
                    Ok(Some(_)) => ok += 1,
                    Ok(None) => panic!("nobody else holds these keys"),
                    Err(e) => {
                        let code = e
                            .as_backend()
                            .and_then(|b| b.code().map(|c| c.code().to_owned()));
                        assert_eq!(code.as_deref(), Some("53200"), "unexpected error: {e}");
                        failed += 1;
                    }
                }
            }
            (ok, failed)
        }));
    }
    let (mut ok, mut failed) = (0, 0);
    for t in tasks {
        let (o, f) = t.await.unwrap();
        ok += o;
        failed += f;
    }
    assert!(
        failed > 0,
        "the lock table never overflowed: the test proves nothing"
    );
    assert!(ok > 0);
    // What the manager believes is exactly what the server holds: locks a
    // failed batch took were given back, none that succeeded were lost.
    assert_eq!(m.held_lock_count(), ok);
    assert_eq!(granted_advisory(&observer, db_oid).await, ok as i64);
    assert_eq!(m.release_all().await.unwrap(), ok);
    assert_eq!(granted_advisory(&observer, db_oid).await, 0);
    assert_eq!(m.held_lock_count(), 0);
}
