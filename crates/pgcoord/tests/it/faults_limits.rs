//! Fault injection: limits and server-side timeouts.
//!
//! An exhausted wait-session pool or lock budget, `statement_timeout` /
//! `lock_timeout` set on the server, `idle_session_timeout` set on the
//! server: typed errors or keepalive, never a hang past the caller's
//! timeout.

use crate::common;
use crate::fault_support;

use std::time::Duration;

use fault_support::*;
use pgcoord::PostgresLockManager;
use pgcoord::{error::AcquireFailure, lock_id_for_key, DistributedLock, LockRegistry};
use pgcoord_testkit::locks::{eventually, eventually_async};

const SECS: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_wait_pool_times_out_within_the_callers_timeout() {
    let (_cluster, db) = private_db(&[]).await;
    let client = db.connect().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("pool")
        .max_wait_sessions(1)
        .build()
        .unwrap();
    let blocker = common::manager(&db, "blocker");
    let (k1, k2) = (key("k1"), key("k2"));
    let h1 = blocker.acquire(&k1, None).await.unwrap();
    let h2 = blocker.acquire(&k2, None).await.unwrap();
    let m2 = m.clone();
    let k = k1.clone();
    let first = tokio::spawn(async move { m2.acquire(&k, None).await });
    common::wait_for_waiters(&client, lock_id_for_key(&k1), 1).await;
    // The only wait session is busy: the second wait gives up in time.
    let err = tokio::time::timeout(SECS, m.acquire(&k2, Some(Duration::from_millis(500))))
        .await
        .expect("hung past the caller's timeout")
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(
        err.as_lock_acquisition().unwrap().timeout,
        Some(Duration::from_millis(500))
    );
    assert_eq!(
        common::lock_rows(&client, lock_id_for_key(&k2)).await,
        (1, 0),
        "nobody queued"
    );
    // Once the session is free (its lock released), the next wait runs.
    h1.release().await.unwrap();
    first.await.unwrap().unwrap().release().await.unwrap();
    let m2 = m.clone();
    let k = k2.clone();
    let second = tokio::spawn(async move { m2.acquire(&k, Some(SECS)).await });
    common::wait_for_waiters(&client, lock_id_for_key(&k2), 1).await;
    h2.release().await.unwrap();
    second.await.unwrap().unwrap().release().await.unwrap();
    assert_eq!(m.held_lock_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_budget_is_a_typed_refusal_for_waits_too() {
    let (_cluster, db) = private_db(&[]).await;
    let client = db.connect().await.unwrap();
    let m = PostgresLockManager::builder(db.config().into())
        .max_held_locks(2)
        .build()
        .unwrap();
    let blocker = common::manager(&db, "blocker");
    let contended = key("contended");
    let _held = blocker.acquire(&contended, None).await.unwrap();
    let g1 = m.acquire(&key("a"), None).await.unwrap();
    // One slot left: a wait takes it while it is queued...
    let m2 = m.clone();
    let k = contended.clone();
    let waiting = tokio::spawn(async move { m2.acquire(&k, Some(SECS)).await });
    common::wait_for_waiters(&client, lock_id_for_key(&contended), 1).await;
    // ...so neither a try nor another wait fits.
    for timeout in [Some(Duration::ZERO), Some(Duration::from_secs(1)), None] {
        let err = tokio::time::timeout(SECS, m.acquire(&key("over"), timeout))
            .await
            .expect("hung on an exhausted budget")
            .unwrap_err();
        assert!(
            matches!(
                err.as_lock_acquisition().map(|e| &e.reason),
                Some(AcquireFailure::BudgetExceeded { limit: 2 })
            ),
            "{err:?}"
        );
    }
    waiting.abort();
    let _ = waiting.await;
    g1.release().await.unwrap();
    eventually("budget back", SECS, || m.held_lock_count() == 0).await;
    m.acquire(&key("fits"), None)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_statement_and_lock_timeouts_do_not_cut_waits() {
    // Set server-wide once the database exists (CREATE DATABASE itself can
    // take longer than 200 ms on a busy machine), and per database.
    let (_cluster, db) = private_db(&[]).await;
    let admin = db.connect().await.unwrap();
    for sql in [
        "ALTER SYSTEM SET statement_timeout = '200ms'".to_owned(),
        "ALTER SYSTEM SET lock_timeout = '100ms'".to_owned(),
        "ALTER SYSTEM SET idle_in_transaction_session_timeout = '100ms'".to_owned(),
        "SELECT pg_reload_conf()".to_owned(),
        format!(
            "ALTER DATABASE {} SET statement_timeout = '150ms'",
            db.name()
        ),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    eventually_async("the server applies the new settings", || async {
        let c = db.connect().await.unwrap();
        let row = c
            .query_one("SELECT current_setting('lock_timeout')", &[])
            .await
            .unwrap();
        row.get::<_, String>(0) == "100ms"
    })
    .await;
    let client = db.connect().await.unwrap();
    let m = common::manager(&db, "waits");
    let blocker = common::manager(&db, "blocker");
    let k = key("long-wait");
    let held = blocker.acquire(&k, None).await.unwrap();
    // A bounded wait ends as the caller's timeout, not a server error.
    let err = m
        .acquire(&k, Some(Duration::from_millis(600)))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    let m2 = m.clone();
    let k2 = k.clone();
    let waiter = tokio::spawn(async move { m2.acquire(&k2, Some(SECS)).await });
    common::wait_for_waiters(&client, lock_id_for_key(&k), 1).await;
    // Several times the server's statement_timeout: still waiting.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiter.is_finished(),
        "the wait ended early: {:?}",
        waiter.await
    );
    held.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    // Held well past the server's timeouts, and still held.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!g.is_lost());
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_session_timeout_on_the_server_is_kept_at_bay_by_liveness_pings() {
    let (_cluster, db) = private_db(&[("idle_session_timeout", "2s")]).await;
    let m = common::manager(&db, "keepalive"); // pings every 500 ms
    let blocker = common::manager(&db, "blocker");
    let guard = m.acquire(&key("kept"), None).await.unwrap();
    let contended = key("contended");
    let held = blocker.acquire(&contended, None).await.unwrap();
    let m2 = m.clone();
    let k = contended.clone();
    let taker = tokio::spawn(async move { m2.acquire(&k, Some(SECS)).await });
    let client = db.connect().await.unwrap();
    common::wait_for_waiters(&client, lock_id_for_key(&contended), 1).await;
    held.release().await.unwrap();
    let dedicated = taker.await.unwrap().unwrap();
    // Well past the idle timeout, both sessions are alive and hold their locks.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!guard.is_lost() && !dedicated.is_lost());
    let client = db.connect().await.unwrap();
    assert_eq!(advisory_locks(&client).await, 2);
    dedicated.release().await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_session_timeout_shorter_than_the_ping_interval_is_reported_as_loss() {
    let (_cluster, db) = private_db(&[("idle_session_timeout", "500ms")]).await;
    let m = PostgresLockManager::builder(db.config().into())
        .holder_id("too-slow")
        .liveness_interval(Duration::from_secs(3))
        .build()
        .unwrap();
    let guard = m.acquire(&key("cut"), None).await.unwrap();
    assert_lost(&guard, "idle session timeout").await;
    eventually("registry forgets it", SECS, || m.held_lock_count() == 0).await;
    // Typed, and the next call works on a fresh session.
    assert!(guard.release().await.unwrap_err().is_lock_lost());
    let g = m.acquire(&key("next"), Some(SECS)).await.unwrap();
    g.release().await.unwrap();
}
