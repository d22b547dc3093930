//! Fencing tokens against a real PostgreSQL: the install step, the token
//! sequence across managers and restarts, and protected writes that refuse
//! a replaced holder and hold back the next one until they end.

use crate::common;
use crate::counting_proxy;
use crate::fault_support;

use std::time::Duration;

use common::lock_rows;
use fault_support::{key, private_db};
use pgcoord::{
    error::{AcquireFailure, BackendErrorKind},
    lock_id_for_key, DistributedLock, Error, LockRegistry,
};
use pgcoord::{postgres::fencing, PostgresLockManager};
use pgcoord_testkit::locks::eventually_async;
use pgcoord_testkit::pg::{StopMode, TestDatabase};

const SECS: Duration = Duration::from_secs(30);

/// A key's first token on a fresh server: the first of epoch 1 (timeline 1).
const FIRST_TOKEN: u64 = (1 << fencing::EPOCH_SHIFT) + 1;

fn fenced(db: &TestDatabase, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(db.config().into())
        .holder_id(holder)
        .fencing(true)
        .build()
        .unwrap()
}

async fn installed(db: &TestDatabase, holder: &str) -> PostgresLockManager {
    let m = fenced(db, holder);
    m.install_fencing().await.expect("install fencing");
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_acquire_without_the_table_names_the_install_step() {
    let db = TestDatabase::create().await.unwrap();
    let m = fenced(&db, "uninstalled");
    let k = key("no-table");
    let err = m.acquire(&k, Some(SECS)).await.unwrap_err();
    let failure = &err.as_lock_acquisition().expect("acquisition error").reason;
    assert!(
        matches!(failure, AcquireFailure::Backend(b) if b.kind() == BackendErrorKind::FencingNotInstalled),
        "{err}"
    );
    assert!(err.to_string().contains("install_fencing"), "{err}");
    let err = m
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap_err();
    assert!(
        err.to_string().contains("eventsource lock install"),
        "{err}"
    );
    // Nothing was created behind the user's back, and nothing is held.
    let client = db.connect().await.unwrap();
    let table: Option<String> = client
        .query_one("SELECT to_regclass('eventsource_lock_fences')::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(table, None);
    assert_eq!(lock_rows(&client, lock_id_for_key(&k)).await, (0, 0));
    // After the install, the same manager fences.
    m.install_fencing().await.unwrap();
    let g = m.acquire(&k, Some(SECS)).await.unwrap();
    assert_eq!(g.fence(), Some(FIRST_TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_is_idempotent_even_when_run_concurrently() {
    let db = TestDatabase::create().await.unwrap();
    let m = fenced(&db, "installer");
    let runs = (0..4).map(|_| m.install_fencing());
    for r in futures_util::future::join_all(runs).await {
        r.expect("concurrent install");
    }
    m.install_fencing().await.expect("install again");
    let g = m.acquire(&key("after-install"), Some(SECS)).await.unwrap();
    assert_eq!(g.fence(), Some(FIRST_TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_across_managers_paths_and_a_server_restart() {
    let (cluster, db) = private_db(&[]).await;
    let (a, b) = (installed(&db, "a").await, fenced(&db, "b"));
    let client = db.connect().await.unwrap();
    let k = key("sequence");
    let mut last = 0;
    let mut next = |fence: Option<u64>| {
        let f = fence.expect("a fenced grant carries a token");
        assert!(f > last, "token {f} after {last}");
        last = f;
    };
    // Free, on the batched session.
    let g = a.acquire(&k, Some(SECS)).await.unwrap();
    next(g.fence());
    // Contended: b queues in PostgreSQL, and is granted on a dedicated session.
    let waiter = {
        let (b, k) = (b.clone(), k.clone());
        tokio::spawn(async move { b.acquire(&k, Some(SECS)).await })
    };
    common::wait_for_waiters(&client, lock_id_for_key(&k), 1).await;
    g.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    next(g.fence());
    g.release().await.unwrap();
    // Manual lock through try_acquire.
    let info = a
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .expect("free");
    next(info.fence);
    a.release(&k).await.unwrap();
    // The counter is durable: a restart does not reset it.
    drop(client);
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.restart(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    let fresh = fenced(&db, "after-restart");
    let g = fresh.acquire(&k, Some(SECS)).await.unwrap();
    next(g.fence());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_accepts_the_current_token_and_refuses_a_replaced_holder() {
    let db = TestDatabase::create().await.unwrap();
    let (a, b) = (installed(&db, "a").await, fenced(&db, "b"));
    let mut client = db.connect().await.unwrap();
    let k = key("check");
    let ga = a.acquire(&k, Some(SECS)).await.unwrap();
    let old = ga.info().clone();
    {
        let tx = client.transaction().await.unwrap();
        assert_eq!(fencing::check(&tx, &old).await.unwrap(), old.fence.unwrap());
        tx.commit().await.unwrap();
    }
    ga.release().await.unwrap();
    let gb = b.acquire(&k, Some(SECS)).await.unwrap();
    let tx = client.transaction().await.unwrap();
    match fencing::check(&tx, &old).await.unwrap_err() {
        Error::Fenced(e) => {
            assert_eq!((e.key.as_str(), e.token), (k.as_str(), old.fence.unwrap()));
            assert_eq!(e.current, gb.fence());
            assert!(e.to_string().contains("stale"), "{e}");
        }
        other => panic!("expected Fenced, got {other}"),
    }
    drop(tx);
    let tx = client.transaction().await.unwrap();
    let current = gb.fence().unwrap();
    assert_eq!(
        fencing::check_token(&tx, &k, current).await.unwrap(),
        current
    );
    // A key that was never fenced has no current token.
    let err = fencing::check_token(&tx, "never-fenced", 1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Fenced(e) if e.current.is_none()),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_holder_waits_for_an_in_flight_protected_write() {
    let db = TestDatabase::create().await.unwrap();
    let (a, b) = (installed(&db, "a").await, fenced(&db, "b"));
    let mut writer = db.connect().await.unwrap();
    let observer = db.connect().await.unwrap();
    let k = key("in-flight");
    let ga = a.acquire(&k, Some(SECS)).await.unwrap();
    let old = ga.info().clone();
    let tx = writer.transaction().await.unwrap();
    fencing::check(&tx, &old).await.unwrap();
    // The holder lets go while its write is still open (as a lost holder would).
    ga.release().await.unwrap();
    // A try does not wait on a batched session: it reports the key busy and
    // keeps nothing.
    assert!(b
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    assert_eq!(lock_rows(&observer, lock_id_for_key(&k)).await, (0, 0));
    // The busy row failed the try's statement; the manager's book and its
    // batched session are none the worse for it.
    assert!(!b.is_held(&k));
    assert_eq!(b.held_lock_count(), 0);
    let other = b.try_lock(&key("in-flight-other")).await.unwrap();
    assert!(other.expect("a free key").fence().is_some());
    // A waiting acquire gets the advisory lock, then waits for the row.
    let waiter = {
        let (b, k) = (b.clone(), k.clone());
        tokio::spawn(async move { b.acquire(&k, Some(SECS)).await })
    };
    eventually_async(
        "the next holder's increment to wait for the write",
        || async {
            let row = observer
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND query LIKE '%eventsource_lock_fences%' AND datname = current_database()",
                    &[],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0) == 1
        },
    )
    .await;
    assert!(
        !waiter.is_finished(),
        "granted while the old term still writes"
    );
    tx.commit().await.unwrap();
    let gb = waiter.await.unwrap().unwrap();
    assert!(gb.fence() > old.fence);
    let tx = writer.transaction().await.unwrap();
    assert!(fencing::check(&tx, &old).await.unwrap_err().is_fenced());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_functions_match_the_crate() {
    let db = TestDatabase::create().await.unwrap();
    let m = installed(&db, "sql").await;
    let client = db.connect().await.unwrap();
    let long = "x".repeat(10_000);
    for k in [
        "",
        "a",
        "migration:00000000-0000-0000-0000-000000000000",
        "Grüße/東京",
        &long,
    ] {
        let id: i64 = client
            .query_one("SELECT eventsource_lock_id($1)", &[&k])
            .await
            .unwrap()
            .get(0);
        assert_eq!(id, lock_id_for_key(k), "key {k:?}");
    }
    let k = key("sql-check");
    let g = m.acquire(&k, Some(SECS)).await.unwrap();
    let token = g.fence().unwrap() as i64;
    let ok: i64 = client
        .query_one(
            "SELECT eventsource_lock_fence_check_key($1, $2)",
            &[&k, &token],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(ok, token);
    let err = client
        .query_one(
            "SELECT eventsource_lock_fence_check_key($1, $2)",
            &[&k, &(token - 1)],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some(fencing::FENCED_SQLSTATE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfenced_lock_has_no_token_and_check_says_why() {
    let db = TestDatabase::create().await.unwrap();
    let plain = common::manager(&db, "plain");
    installed(&db, "installer").await;
    let g = plain.acquire(&key("plain"), Some(SECS)).await.unwrap();
    assert_eq!(g.fence(), None);
    let mut client = db.connect().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let err = fencing::check(&tx, g.info()).await.unwrap_err();
    assert!(err.to_string().contains("fencing(true)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_fenced_grants_each_get_their_own_row() {
    let db = TestDatabase::create().await.unwrap();
    let m = installed(&db, "many").await;
    let keys: Vec<String> = (0..500).map(|i| key(&format!("many-{i}"))).collect();
    let tries = keys.iter().map(|k| m.try_lock(k));
    let guards: Vec<_> = futures_util::future::join_all(tries)
        .await
        .into_iter()
        .map(|r| r.unwrap().expect("free key"))
        .collect();
    assert!(guards.iter().all(|g| g.fence() == Some(FIRST_TOKEN)));
    let client = db.connect().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM eventsource_lock_fences", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_with_pipelines_the_write_and_a_stale_token_leaves_nothing_written() {
    let db = TestDatabase::create().await.unwrap();
    let (a, b) = (installed(&db, "a").await, fenced(&db, "b"));
    let mut client = db.connect().await.unwrap();
    client
        .batch_execute("CREATE TABLE protected (id int PRIMARY KEY, v int NOT NULL); INSERT INTO protected VALUES (1, 0)")
        .await
        .unwrap();
    let k = key("check-with");
    let update = "UPDATE protected SET v = v + 1 WHERE id = 1";
    let ga = a.acquire(&k, Some(SECS)).await.unwrap();
    let old = ga.info().clone();
    {
        let tx = client.transaction().await.unwrap();
        let rows = fencing::check_with(&tx, &old, tx.execute_typed(update, &[]))
            .await
            .unwrap();
        assert_eq!(rows, 1);
        tx.commit().await.unwrap();
    }
    ga.release().await.unwrap();
    let gb = b.acquire(&k, Some(SECS)).await.unwrap();
    {
        let tx = client.transaction().await.unwrap();
        let err = fencing::check_with(&tx, &old, tx.execute_typed(update, &[]))
            .await
            .unwrap_err();
        match &err {
            Error::Fenced(e) => assert_eq!((e.token, e.current), (old.fence.unwrap(), gb.fence())),
            other => panic!("expected Fenced, got {other}"),
        }
        // The server aborted the transaction: even a commit now keeps
        // nothing of the pipelined write.
        tx.commit().await.ok();
    }
    let v: i32 = client
        .query_one("SELECT v FROM protected WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, 1, "only the write under the current token landed");
}

/// Fenced grants taken together cost one statement per batch, not one
/// each: counted as the server's ReadyForQuery messages on the one shared
/// session, through a proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_fenced_grants_take_a_handful_of_statements() {
    let db = TestDatabase::create().await.unwrap();
    installed(&db, "installer").await;
    let port = db.config().get_ports()[0];
    let proxy = counting_proxy::CountingProxy::start(port).await;
    let url = db
        .url()
        .replacen(&format!(":{port}/"), &format!(":{}/", proxy.port), 1);
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    let m = PostgresLockManager::builder(config.into())
        .holder_id("batched")
        .fencing(true)
        .batched_sessions(1)
        .liveness_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    // Open the session and prepare its statements first.
    m.acquire(&key("warm"), Some(SECS))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let before: u64 = proxy.counts().iter().sum();
    let keys: Vec<String> = (0..1000).map(|i| key(&format!("batched-{i}"))).collect();
    let guards: Vec<_> = futures_util::future::join_all(keys.iter().map(|k| m.try_lock(k)))
        .await
        .into_iter()
        .map(|r| r.unwrap().expect("free key"))
        .collect();
    let statements = proxy.counts().iter().sum::<u64>() - before;
    assert!(guards.iter().all(|g| g.fence() == Some(FIRST_TOKEN)));
    println!("1000 fenced grants: {statements} statements");
    assert!(
        statements <= 50,
        "{statements} statements for 1000 fenced grants"
    );
}
