//! Deadlines of a few milliseconds tell the truth: against a key held
//! elsewhere they are timeouts (never "the server did not answer"), against
//! a free key the first attempt is granted however long connecting takes,
//! only a server that stays silent is reported as not answering, and a
//! timed-out wait never leaves the manager believing it holds the key.

use crate::common;
use crate::fault_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{manager, shared_db};
use fault_support::{private_db, Proxy, ProxyMode};
use pgcoord::PostgresLockManager;
use pgcoord::{error::BackendErrorKind, DistributedLock, LockRegistry, SharedLock};

fn key(name: &str) -> String {
    format!("deadline:{name}:{}", uuid::Uuid::new_v4())
}

/// A lock timeout, not a server that did not answer.
fn assert_lock_timeout(result: pgcoord::Result<pgcoord::LockGuard>, what: &str) {
    match result {
        Err(e) if e.is_timeout() && e.as_backend().is_none() => {}
        Err(e) => panic!("{what}: expected a lock timeout, got {e}"),
        Ok(_) => panic!("{what}: granted a key held elsewhere"),
    }
}

/// Other work on the same server and the same two cores while the
/// deadlines run: try-lock pairs in a loop until told to stop.
fn background_load(
    db: &pgcoord_testkit::pg::TestDatabase,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    let m = manager(db, "load");
    tokio::spawn(async move {
        let mut pairs = 0u64;
        while !stop.load(Ordering::Relaxed) && pairs < 1_000_000 {
            let k = format!("deadline:load:{}", pairs % 64);
            if let Ok(Some(g)) = m.try_lock(&k).await {
                let _ = g.release().await;
            }
            pairs += 1;
        }
        pairs
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_of_a_few_milliseconds_against_a_held_key_are_timeouts() {
    let db = shared_db().await;
    let k = key("held");
    let holder = manager(db, "holder");
    let held = holder.acquire(&k, None).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let load = background_load(db, stop.clone());
    let reused = manager(db, "reused");
    let mut tasks = Vec::new();
    for t in 0..4u64 {
        let (k, db_config, reused) = (k.clone(), db.config(), reused.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..25u64 {
                let deadline = Duration::from_millis(1 + (i + t) % 8);
                // Half on a manager that has to connect first (connecting
                // takes longer than most of these deadlines).
                let result = if i % 2 == 0 {
                    let fresh = PostgresLockManager::builder(db_config.clone().into())
                        .build()
                        .unwrap();
                    let r = fresh.acquire(&k, Some(deadline)).await;
                    fresh.close().await.unwrap();
                    r
                } else {
                    reused.acquire(&k, Some(deadline)).await
                };
                assert_lock_timeout(result, &format!("task {t}, attempt {i}, {deadline:?}"));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(load.await.unwrap() > 0, "the load ran");
    assert_eq!(reused.held_lock_count(), 0);
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_deadline_on_a_free_key_gets_its_one_attempt() {
    let db = shared_db().await;
    for i in 0..10 {
        // A manager with no session yet: the attempt has to connect first.
        let m = PostgresLockManager::builder(db.config().into())
            .build()
            .unwrap();
        let k = key("free");
        let g = m
            .acquire(&k, Some(Duration::from_millis(1)))
            .await
            .unwrap_or_else(|e| panic!("attempt {i}: a free key was not granted: {e}"));
        g.release().await.unwrap();
        let s = m
            .acquire_shared(&k, Some(Duration::from_millis(1)))
            .await
            .unwrap_or_else(|e| panic!("attempt {i}: a free key was not shared: {e}"));
        s.release().await.unwrap();
        m.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_reported_as_not_answering_whatever_the_deadline() {
    let (_cluster, db) = private_db(&[]).await;
    let proxy = Proxy::start(db.config().get_ports()[0]).await;
    let config: tokio_postgres::Config =
        format!("postgres://postgres@127.0.0.1:{}/{}", proxy.port, db.name())
            .parse()
            .unwrap();
    let m = PostgresLockManager::builder(config.into())
        .liveness_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // A session is open and answering; then the network goes silent.
    m.acquire(&key("warm"), None)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    proxy.set_mode(ProxyMode::BlackHole);
    for deadline in [Duration::from_millis(5), Duration::from_millis(800)] {
        let err = m.acquire(&key("silent"), Some(deadline)).await.unwrap_err();
        let kind = err.as_backend().map(|b| b.kind());
        assert!(
            !err.is_timeout()
                && matches!(
                    kind,
                    Some(BackendErrorKind::NoAnswer | BackendErrorKind::Closed)
                ),
            "{deadline:?}: a silent server must not look like a held key: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_wait_never_makes_the_manager_think_it_holds_the_key() {
    let db = shared_db().await;
    let a = manager(db, "a");
    let b = manager(db, "b");
    for round in 0..20 {
        let k = key("abandoned");
        let held = b.acquire(&k, None).await.unwrap();
        let err = a
            .acquire(&k, Some(Duration::from_millis(300)))
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "round {round}: {err}");
        // Freed the moment a's wait has timed out: a's server-side wait may
        // still be queued and get the key, for nobody.
        held.release().await.unwrap();
        assert!(
            !a.is_held(&k),
            "round {round}: a reports a key nobody of it holds"
        );
        assert_eq!(a.held_lock_count(), 0, "round {round}");
        let g = a.try_lock(&k).await.unwrap().unwrap_or_else(|| {
            panic!("round {round}: a try on the free key lost to a's own abandoned wait")
        });
        assert!(a.is_held(&k));
        g.release().await.unwrap();
        assert_eq!(a.held_lock_count(), 0, "round {round}");
        let gb = b
            .try_lock(&k)
            .await
            .unwrap()
            .expect("the key is free again");
        gb.release().await.unwrap();
    }
}
