//! `PostgresLockManager` against a real PostgreSQL: the conformance suite,
//! then what only a database-backed manager can promise.

use crate::common;

use std::time::Duration;

use common::{lock_rows, manager, terminate, wait_for_waiters};
use pgcoord::PostgresLockManager;
use pgcoord::{error::AcquireFailure, lock_id_for_key, DistributedLock, LockRegistry};
use pgcoord_testkit::locks::{eventually, eventually_async, Fencing};
use pgcoord_testkit::pg::TestDatabase;

// Each case gets its own database (advisory locks are per database).
pgcoord_testkit::lock_conformance_tests!(fencing: Fencing::NoTokens, || async {
    let db = TestDatabase::create().await.expect("test database");
    (manager(&db, "primary"), manager(&db, "observer"), db)
});

fn key(name: &str) -> String {
    format!("pg:{name}:{}", uuid::Uuid::new_v4())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_exclude_each_other_and_waiter_takes_over() {
    let db = &TestDatabase::create().await.unwrap();
    let (a, b) = (manager(db, "a"), manager(db, "b"));
    let k = key("exclusion");
    let ga = a.acquire(&k, None).await.unwrap();
    assert!(b
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    let err = b
        .acquire(&k, Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    let b2 = b.clone();
    let k2 = k.clone();
    let waiter = tokio::spawn(async move { b2.acquire(&k2, None).await });
    let client = db.connect().await.unwrap();
    wait_for_waiters(&client, lock_id_for_key(&k), 1).await;
    ga.release().await.unwrap();
    let gb = waiter.await.unwrap().unwrap();
    assert!(b.is_held(&k) && !a.is_held(&k));
    gb.release().await.unwrap();
    assert_eq!(lock_rows(&client, lock_id_for_key(&k)).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order() {
    let db = &TestDatabase::create().await.unwrap();
    let client = db.connect().await.unwrap();
    let k = key("fifo");
    let id = lock_id_for_key(&k);
    let holder = manager(db, "holder");
    let guard = holder.acquire(&k, None).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for i in 0..8i64 {
        let m = manager(db, &format!("waiter-{i}"));
        let tx = tx.clone();
        let k = k.clone();
        tasks.push(tokio::spawn(async move {
            let g = m.acquire(&k, None).await.unwrap();
            tx.send(i).unwrap();
            g.release().await.unwrap();
        }));
        wait_for_waiters(&client, id, i + 1).await;
    }
    guard.release().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    drop(tx);
    let mut order = Vec::new();
    while let Some(i) = rx.recv().await {
        order.push(i);
    }
    assert_eq!(order, (0..8).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_locks_use_at_most_two_connections() {
    let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("capacity")
        .max_held_locks(10_000)
        .build()
        .unwrap();
    let keys: Vec<String> = (0..10_000).map(|i| format!("cap-{i}")).collect();
    let mut tasks = Vec::new();
    for chunk in keys.chunks(100) {
        let m = m.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            for k in chunk {
                assert!(m
                    .try_lock(&k)
                    .await
                    .map(|g| g.map(pgcoord::LockGuard::into_manual))
                    .unwrap()
                    .is_some());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(m.held_lock_count(), 10_000);
    let client = db.connect().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'eventsource/capacity' \
             AND datname = current_database()",
            &[],
        )
        .await
        .unwrap();
    let sessions: i64 = row.get(0);
    assert!(sessions <= 2, "{sessions} sessions for 10,000 locks");
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 10_000);
    // Over budget: a typed refusal, nothing taken.
    let err = m
        .try_lock("cap-over")
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap_err();
    assert!(matches!(
        err.as_lock_acquisition().map(|e| &e.reason),
        Some(AcquireFailure::BudgetExceeded { limit: 10_000 })
    ));
    assert_eq!(m.release_all().await.unwrap(), 10_000);
    assert_eq!(m.held_lock_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_refuses_acquire_beyond_the_limit() {
    let db = &TestDatabase::create().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .max_held_locks(2)
        .build()
        .unwrap();
    let g1 = m.acquire(&key("b1"), None).await.unwrap();
    let g2 = m.acquire(&key("b2"), None).await.unwrap();
    let err = m
        .acquire(&key("b3"), Some(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(
        err.as_lock_acquisition().map(|e| &e.reason),
        Some(AcquireFailure::BudgetExceeded { limit: 2 })
    ));
    g1.release().await.unwrap();
    let g3 = m.acquire(&key("b3"), None).await.unwrap();
    g2.release().await.unwrap();
    g3.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_labelled_and_never_idle_in_transaction() {
    let db = &TestDatabase::create().await.unwrap();
    let holder = format!("label-{}", uuid::Uuid::new_v4().simple());
    let m = manager(db, &holder);
    let guard = m.acquire(&key("label"), None).await.unwrap();
    assert_eq!(guard.info().holder_id.as_deref(), Some(holder.as_str()));
    let client = db.connect().await.unwrap();
    let rows = client
        .query(
            "SELECT state FROM pg_stat_activity WHERE application_name = $1",
            &[&format!("eventsource/{holder}")],
        )
        .await
        .unwrap();
    assert!(!rows.is_empty(), "no session labelled with the holder id");
    for r in rows {
        let state: Option<String> = r.get(0);
        assert_ne!(state.as_deref(), Some("idle in transaction"));
    }
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_shared_session_signals_loss_and_manager_recovers() {
    let db = &TestDatabase::create().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("loss")
        .batched_sessions(1)
        .build()
        .unwrap();
    let other = manager(db, "other");
    let k = key("loss");
    let guard = m.acquire(&k, None).await.unwrap();
    let manual = key("loss-manual");
    m.try_lock(&manual)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .unwrap();
    assert!(!guard.is_lost());
    let pids = m.batched_session_pids();
    assert_eq!(pids.len(), 1);
    let client = db.connect().await.unwrap();
    terminate(&client, pids[0]).await;
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("loss signal never fired");
    assert!(guard.is_lost());
    eventually(
        "registry forgets lost locks",
        Duration::from_secs(10),
        || m.held_lock_count() == 0,
    )
    .await;
    assert!(!m.is_held(&k) && !m.is_held(&manual));
    // The server released them. (The client may hear of the termination,
    // through the backend's FATAL message, a moment before the dying
    // backend has let go of its locks: loss is reported first, never after.)
    let g = other
        .acquire(&k, Some(Duration::from_secs(10)))
        .await
        .unwrap();
    g.release().await.unwrap();
    // ...releasing the lost guard says so, and the manager works on a new session.
    assert!(guard.release().await.unwrap_err().is_lock_lost());
    let g = m.acquire(&k, Some(Duration::from_secs(5))).await.unwrap();
    assert_ne!(m.batched_session_pids(), pids);
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_stops_work_when_the_dedicated_session_dies() {
    let db = &TestDatabase::create().await.unwrap();
    let m = manager(db, "dedicated-loss");
    let blocker = manager(db, "blocker");
    let k = key("dedicated");
    let id = lock_id_for_key(&k);
    // Contended first, so the lock ends up on a dedicated session.
    let held = blocker.acquire(&k, None).await.unwrap();
    let m2 = m.clone();
    let k2 = k.clone();
    let work = tokio::spawn(async move {
        m2.with_lock(&k2, None, |_| std::future::pending::<()>())
            .await
    });
    let client = db.connect().await.unwrap();
    wait_for_waiters(&client, id, 1).await;
    held.release().await.unwrap();
    eventually("the waiter got the lock", Duration::from_secs(10), || {
        m.is_held(&k)
    })
    .await;
    let pid: i32 = client
        .query_one(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        !m.batched_session_pids().contains(&pid),
        "not on a dedicated session"
    );
    terminate(&client, pid).await;
    let err = tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .expect("with_lock kept running after the loss")
        .unwrap()
        .unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    eventually("count back to 0", Duration::from_secs(10), || {
        m.held_lock_count() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_timeout_does_not_leak_into_the_next_wait() {
    let db = &TestDatabase::create().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .max_idle_wait_sessions(1)
        .build()
        .unwrap();
    let blocker = manager(db, "blocker");
    let k = key("leak");
    let held = blocker.acquire(&k, None).await.unwrap();
    // Connected first: a deadline that passes while connecting is the
    // server's silence, not the timeout this test is about.
    m.try_lock(&key("warm"))
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    let err = m
        .acquire(&k, Some(Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    // The same pooled session now waits without a bound: it must still be
    // waiting well after the earlier 50 ms would have fired.
    let m2 = m.clone();
    let k2 = k.clone();
    let waiter = tokio::spawn(async move { m2.acquire(&k2, None).await });
    let client = db.connect().await.unwrap();
    wait_for_waiters(&client, lock_id_for_key(&k), 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the unbounded wait ended early: {:?}",
        waiter.await
    );
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waits_leave_nothing_in_pg_locks() {
    let db = &TestDatabase::create().await.unwrap();
    let m = manager(db, "cancel-check");
    let blocker = manager(db, "blocker");
    let k = key("cancel-pg");
    let id = lock_id_for_key(&k);
    let client = db.connect().await.unwrap();
    let held = blocker.acquire(&k, None).await.unwrap();
    for _ in 0..5 {
        let fut = m.acquire(&k, None);
        let waited = tokio::time::timeout(Duration::from_millis(100), fut).await;
        assert!(waited.is_err());
    }
    eventually_async("cancelled waiters leave the queue", || async {
        lock_rows(&client, id).await == (1, 0)
    })
    .await;
    held.release().await.unwrap();
    assert_eq!(lock_rows(&client, id).await, (0, 0));
    assert_eq!(m.held_lock_count(), 0);
}

/// One manager holding a shared lock, then trying several keys at once
/// without waiting (what a segmented projection runner does): every try
/// answers. The work runs on a runtime of its own thread, so a deadlock
/// inside the manager fails the test instead of hanging it.
#[test]
fn concurrent_tries_after_a_shared_hold_all_answer() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use pgcoord::SharedLock;
            let db = TestDatabase::create().await.unwrap();
            let locks = PostgresLockManager::builder(db.config().into())
                .build()
                .unwrap();
            let _presence = locks.acquire_shared("presence", None).await.unwrap();
            let tries = (0..4).map(|i| {
                let locks = locks.clone();
                tokio::spawn(async move {
                    locks
                        .acquire(&format!("segment-{i}"), Some(Duration::ZERO))
                        .await
                        .map(|g| g.key().to_owned())
                })
            });
            let got: Vec<_> = futures_util::future::join_all(tries).await;
            let _ = tx.send(got.into_iter().filter(|r| matches!(r, Ok(Ok(_)))).count());
        });
    });
    let taken = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the tries did not answer within a minute: the manager is stuck");
    assert_eq!(taken, 4);
}

/// A guard whose lock `release_all` took says so when released, and only
/// that: its session is alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_guard_that_release_all_took_names_release_all() {
    let db = &TestDatabase::create().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .build()
        .unwrap();
    let guard = m.acquire(&key("taken"), None).await.unwrap();
    assert_eq!(m.release_all().await.unwrap(), 1);
    let err = guard.release().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    assert!(
        err.to_string().ends_with("it was released by release_all"),
        "{err}"
    );
}
