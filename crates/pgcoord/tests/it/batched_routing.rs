//! Which batched session new work goes to: a light load stays on the first
//! one (few, large statements), and many held locks open one more.

use std::collections::HashSet;

use crate::common;
use pgcoord::{lock_id_for_key, DistributedLock, LockGuard, LockRegistry, PostgresLockManager};
use pgcoord_testkit::pg::TestDatabase;

/// The server process ids holding advisory locks on `keys` (this database).
async fn holders_of(client: &tokio_postgres::Client, keys: &[String]) -> HashSet<i32> {
    let ids: Vec<i64> = keys.iter().map(|k| lock_id_for_key(k)).collect();
    let rows = client
        .query(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND ((classid::int8 << 32) | objid::int8) = ANY($1) \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&ids],
        )
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

/// Takes every key of `keys` as a manual lock, from `tasks` tasks at once.
async fn take_all(m: &PostgresLockManager, keys: &[String], tasks: usize) {
    let mut handles = Vec::new();
    for chunk in keys.chunks(keys.len().div_ceil(tasks)) {
        let (m, chunk) = (m.clone(), chunk.to_vec());
        handles.push(tokio::spawn(async move {
            for k in chunk {
                let guard = m.try_lock(&k).await.unwrap();
                assert!(guard.map(LockGuard::into_manual).is_some(), "{k} was held");
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_light_load_stays_on_the_first_batched_session() {
    let db = TestDatabase::create().await.unwrap();
    let m = common::manager(&db, "routing-light");
    let keys: Vec<String> = (0..200).map(|i| format!("light-{i}")).collect();
    // Twenty callers at once: spread by count, they would use both sessions.
    take_all(&m, &keys, 20).await;
    let client = db.connect().await.unwrap();
    let holders = holders_of(&client, &keys).await;
    assert_eq!(holders.len(), 1, "200 locks on {holders:?}");
    let pid = holders.into_iter().next().unwrap();
    assert!(m.batched_session_pids().contains(&pid));
    assert_eq!(m.release_all().await.unwrap(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_held_locks_send_new_work_to_a_third_session() {
    let db = TestDatabase::create().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("routing-many")
        .max_held_locks(10_001)
        .build()
        .unwrap();
    let keys: Vec<String> = (0..10_000).map(|i| format!("many-{i}")).collect();
    take_all(&m, &keys, 100).await;
    let client = db.connect().await.unwrap();
    let two = holders_of(&client, &keys).await;
    assert!(two.len() <= 2, "10,000 locks on {two:?}");
    let extra = vec!["many-extra".to_owned()];
    let guard = m.try_lock(&extra[0]).await.unwrap().expect("free key");
    let third = holders_of(&client, &extra).await;
    assert_eq!(third.len(), 1);
    assert!(
        two.is_disjoint(&third),
        "the 10,001st lock went to {third:?}"
    );
    assert_eq!(m.batched_session_pids().len(), 3);
    guard.release().await.unwrap();
    assert_eq!(m.release_all().await.unwrap(), 10_000);
}
