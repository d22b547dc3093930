//! Transaction-scoped advisory locks (`acquire_xact`, `try_acquire_xact`)
//! against a real PostgreSQL: released by commit and rollback, exclusive
//! with the manager's session-level locks, a timeout or a dropped call
//! leaves the caller's transaction usable and nothing held.

use crate::common;
use crate::fault_support;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{lock_rows, manager, shared_db, wait_for_waiters};
use pgcoord::postgres::{acquire_xact, try_acquire_xact};
use pgcoord::{
    error::{AcquireFailure, BackendErrorKind},
    lock_id_for_key, DistributedLock,
};
use pgcoord_testkit::locks::eventually_async;
use tokio_postgres::{Client, Transaction};

fn key(name: &str) -> String {
    format!("xact:{name}:{}", uuid::Uuid::new_v4())
}

async fn pid(tx: &Transaction<'_>) -> i32 {
    tx.query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Advisory-lock rows of one backend for `lock_id`: (granted, waiting).
async fn rows_of(observer: &Client, pid: i32, lock_id: i64) -> (i64, i64) {
    let row = observer
        .query_one(
            "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) \
             FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND pid = $1 \
             AND ((classid::int8 << 32) | objid::int8) = $2",
            &[&pid, &lock_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The transaction still runs statements (it is not aborted).
async fn assert_usable(tx: &Transaction<'_>) {
    let one: i32 = tx.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_on_commit() {
    let db = shared_db().await;
    let other = manager(db, "other");
    let mut client = db.connect().await.unwrap();
    let k = key("commit");
    let tx = client.transaction().await.unwrap();
    let lock = acquire_xact(&tx, &k, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(lock.lock_id, lock_id_for_key(&k));
    assert!(other
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    tx.commit().await.unwrap();
    assert!(other
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_some());
    other.release(&k).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_on_rollback_and_on_drop_of_the_transaction() {
    let db = shared_db().await;
    let other = manager(db, "other");
    let mut client = db.connect().await.unwrap();
    let k = key("rollback");
    let tx = client.transaction().await.unwrap();
    acquire_xact(&tx, &k, None).await.unwrap();
    assert!(other
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    tx.rollback().await.unwrap();
    assert!(other
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_some());
    other.release(&k).await.unwrap();

    let tx = client.transaction().await.unwrap();
    assert!(try_acquire_xact(&tx, &k).await.unwrap().is_some());
    drop(tx); // tokio-postgres queues a ROLLBACK
    assert_usable_client(&client).await;
    assert!(other
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_some());
}

async fn assert_usable_client(client: &Client) {
    let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excludes_a_session_lock_of_the_same_key_both_ways() {
    let db = shared_db().await;
    let m = manager(db, "session-holder");
    let mut client = db.connect().await.unwrap();
    let k = key("exclusion");
    // Session lock first: the transaction cannot take it.
    let guard = m.acquire(&k, None).await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert!(try_acquire_xact(&tx, &k).await.unwrap().is_none());
    assert_usable(&tx).await;
    // Released: the transaction waits for it and gets it.
    let waiter = m.clone();
    let (tx_pid, id) = (pid(&tx).await, lock_id_for_key(&k));
    let observer = db.connect().await.unwrap();
    let taking = acquire_xact(&tx, &k, None);
    let release = async {
        wait_for_waiters(&observer, id, 1).await;
        guard.release().await.unwrap();
    };
    let (taken, ()) = tokio::join!(taking, release);
    taken.unwrap();
    assert_eq!(rows_of(&observer, tx_pid, id).await, (1, 0));
    // Transaction lock held: the manager cannot take it.
    assert!(waiter
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    let err = waiter
        .acquire(&k, Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    tx.commit().await.unwrap();
    // The manager's abandoned server-side wait may still be granted and
    // given back after the commit.
    eventually_async("nothing held after the commit", || async {
        lock_rows(&observer, id).await == (0, 0)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_leaves_the_transaction_usable_with_its_work_and_settings() {
    let db = shared_db().await;
    let m = manager(db, "holder");
    let mut client = db.connect().await.unwrap();
    let k = key("timeout");
    let guard = m.acquire(&k, None).await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.batch_execute(
        "CREATE TEMP TABLE work (n int) ON COMMIT DROP; INSERT INTO work VALUES (1); \
         SET LOCAL lock_timeout = '7s'",
    )
    .await
    .unwrap();
    let err = acquire_xact(&tx, &k, Some(Duration::from_millis(150)))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(err.key(), Some(k.as_str()));
    assert_eq!(
        err.as_lock_acquisition().unwrap().timeout,
        Some(Duration::from_millis(150))
    );
    // The caller's work and its own lock_timeout survived.
    let n: i64 = tx
        .query_one("SELECT count(*) FROM work", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    let setting: String = tx
        .query_one("SELECT current_setting('lock_timeout')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(setting, "7s");
    // Zero timeout: one attempt, the same error kind.
    let err = acquire_xact(&tx, &k, Some(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    guard.release().await.unwrap();
    acquire_xact(&tx, &k, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    let setting: String = tx
        .query_one("SELECT current_setting('lock_timeout')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(setting, "7s", "the lock's own lock_timeout was put back");
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_form_takes_a_free_key_once_per_transaction_and_reports_a_held_one() {
    let db = shared_db().await;
    let mut a = db.connect().await.unwrap();
    let mut b = db.connect().await.unwrap();
    let observer = db.connect().await.unwrap();
    let k = key("try");
    let id = lock_id_for_key(&k);
    let ta = a.transaction().await.unwrap();
    let lock = try_acquire_xact(&ta, &k).await.unwrap().expect("free");
    assert_eq!((lock.key.as_str(), lock.lock_id), (k.as_str(), id));
    let tb = b.transaction().await.unwrap();
    assert!(try_acquire_xact(&tb, &k).await.unwrap().is_none());
    assert_usable(&tb).await;
    // No savepoint is left behind on either transaction.
    let err = tb
        .batch_execute("ROLLBACK TO SAVEPOINT eventsource_xact_lock")
        .await
        .unwrap_err();
    assert_eq!(err.code().unwrap().code(), "3B001", "{err}");
    drop(tb);
    assert_eq!(rows_of(&observer, pid(&ta).await, id).await, (1, 0));
    ta.commit().await.unwrap();
    assert_eq!(lock_rows(&observer, id).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_answer_is_a_backend_timeout_not_held() {
    let db = shared_db().await;
    let proxy = fault_support::Proxy::start(db.config().get_ports()[0]).await;
    let url = format!("postgres://postgres@127.0.0.1:{}/{}", proxy.port, db.name());
    let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let tx = client.transaction().await.unwrap();
    proxy.set_mode(fault_support::ProxyMode::BlackHole);
    let err = acquire_xact(&tx, &key("silent"), Some(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(!err.is_timeout(), "{err}");
    assert_eq!(err.as_backend().unwrap().kind(), BackendErrorKind::NoAnswer);
    let err = try_acquire_xact(&tx, &key("silent-try")).await.unwrap_err();
    assert_eq!(err.as_backend().unwrap().kind(), BackendErrorKind::NoAnswer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_safety_a_wait_dropped_mid_wait_leaves_nothing_held() {
    let db = shared_db().await;
    let m = manager(db, "holder");
    let observer = db.connect().await.unwrap();
    let mut client = db.connect().await.unwrap();
    let k = key("dropped-wait");
    let id = lock_id_for_key(&k);
    let guard = m.acquire(&k, None).await.unwrap();
    let tx = client.transaction().await.unwrap();
    let tx_pid = pid(&tx).await;
    {
        let wait = acquire_xact(&tx, &k, None);
        let queued = wait_for_waiters(&observer, id, 1);
        tokio::select! {
            _ = wait => panic!("granted while held"),
            () = queued => {}
        }
        // The wait future is dropped here, mid-wait.
    }
    assert_eq!(rows_of(&observer, tx_pid, id).await, (0, 1));
    // The holder lets go: the abandoned wait is granted and undone at once.
    guard.release().await.unwrap();
    assert_usable(&tx).await;
    assert_eq!(rows_of(&observer, tx_pid, id).await, (0, 0));
    assert!(
        m.try_lock(&k)
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))
            .unwrap()
            .is_some(),
        "nothing held"
    );
    m.release(&k).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_safety_a_bounded_wait_dropped_ends_at_its_deadline_with_nothing_held() {
    let db = shared_db().await;
    let m = manager(db, "holder");
    let observer = db.connect().await.unwrap();
    let mut client = db.connect().await.unwrap();
    let k = key("dropped-bounded");
    let id = lock_id_for_key(&k);
    let _guard = m.acquire(&k, None).await.unwrap();
    let tx = client.transaction().await.unwrap();
    let tx_pid = pid(&tx).await;
    {
        let wait = acquire_xact(&tx, &k, Some(Duration::from_millis(300)));
        tokio::select! {
            _ = wait => panic!("ended before it was queued"),
            () = wait_for_waiters(&observer, id, 1) => {}
        }
    }
    // The next statement runs after the server ended the wait and the
    // queued rollback: the transaction is usable and waits for nothing.
    assert_usable(&tx).await;
    assert_eq!(rows_of(&observer, tx_pid, id).await, (0, 0));
    tx.commit().await.unwrap();
}

/// Polls `fut` once (enough to send its statement), then drops it.
fn poll_once_and_drop<F: Future>(fut: F) -> bool {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    matches!(fut.as_mut().poll(&mut cx), Poll::Pending)
}

// One thread: the driver's connection task cannot run between the poll
// that queues a statement and the drop, so the first poll is never
// answered (on two threads a loaded machine could deliver the answer in
// between). The statement still reaches the server after the drop.
#[tokio::test]
async fn cancel_safety_a_dropped_try_gives_back_what_it_took() {
    let db = shared_db().await;
    let m = manager(db, "other");
    let observer = db.connect().await.unwrap();
    let mut client = db.connect().await.unwrap();
    let k = key("dropped-try");
    let id = lock_id_for_key(&k);
    let tx = client.transaction().await.unwrap();
    let tx_pid = pid(&tx).await;
    for _ in 0..20 {
        assert!(
            poll_once_and_drop(try_acquire_xact(&tx, &k)),
            "sent, not answered"
        );
        assert!(poll_once_and_drop(acquire_xact(&tx, &k, None)));
    }
    assert_usable(&tx).await;
    assert_eq!(rows_of(&observer, tx_pid, id).await, (0, 0));
    assert!(m
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_some());
    // Held elsewhere now: calling again finds it so.
    assert!(try_acquire_xact(&tx, &k).await.unwrap().is_none());
    m.release(&k).await.unwrap();
    assert!(try_acquire_xact(&tx, &k).await.unwrap().is_some());
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_and_an_aborted_transaction_are_reported_as_such() {
    let db = shared_db().await;
    let m = manager(db, "holder");
    let mut client = db.connect().await.unwrap();
    let k = key("cancelled");
    let _guard = m.acquire(&k, None).await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL statement_timeout = '100ms'")
        .await
        .unwrap();
    let err = acquire_xact(&tx, &k, None).await.unwrap_err();
    let reason = &err.as_lock_acquisition().unwrap().reason;
    assert!(matches!(reason, AcquireFailure::Cancelled { .. }), "{err}");
    assert_usable(&tx).await;
    // A transaction already aborted by the caller's own error.
    assert!(tx.batch_execute("SELECT 1/0").await.is_err());
    let err = try_acquire_xact(&tx, &key("aborted")).await.unwrap_err();
    assert_eq!(
        err.as_backend().unwrap().code().map(|c| c.code()),
        Some("25P02"),
        "{err}"
    );
}

/// The futures are Send (usable in spawned tasks).
#[allow(dead_code)]
fn futures_are_send(tx: &Transaction<'_>) {
    fn send<T: Send>(_: T) {}
    send(acquire_xact(tx, "k", None));
    send(try_acquire_xact(tx, "k"));
}
