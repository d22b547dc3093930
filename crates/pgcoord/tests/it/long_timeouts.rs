//! Timeouts too long for a deadline (`Some(Duration::MAX)`) wait as long
//! as it takes, as `None` does and as `PostgresLockManager::acquire`
//! always did: `acquire_many`, `Semaphore::acquire` and `acquire_xact`
//! used to panic computing theirs (`Instant + Duration` overflowed). And a
//! timeout beyond PostgreSQL's largest `lock_timeout` (INT_MAX ms, about
//! 24.8 days) is a wait, not an "invalid value for parameter" error.
//!
//! Each call waits for a key held elsewhere; once it is seen queued on
//! the server, the holder lets go, and the call must then succeed.

use crate::common;

use std::pin::pin;
use std::time::Duration;

use common::{lock_rows, manager, shared_db, wait_for_waiters};
use pgcoord::coordination::{acquire_many, Semaphore};
use pgcoord::postgres::acquire_xact;
use pgcoord::{lock_id_for_key, DistributedLock};

fn key(name: &str) -> String {
    format!("long-timeout:{name}:{}", uuid::Uuid::new_v4())
}

const MONTH: Duration = Duration::from_secs(30 * 86_400);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_with_duration_max_waits_for_the_holder() {
    let db = shared_db().await;
    let (holder, waiter) = (manager(db, "holder"), manager(db, "waiter"));
    let observer = db.connect().await.unwrap();
    let k = key("acquire");
    let held = holder.acquire(&k, None).await.unwrap();
    let taking = {
        let k = k.clone();
        tokio::spawn(async move { waiter.acquire(&k, Some(Duration::MAX)).await })
    };
    wait_for_waiters(&observer, lock_id_for_key(&k), 1).await;
    held.release().await.unwrap();
    let guard = taking.await.expect("no panic").expect("granted");
    assert_eq!(lock_rows(&observer, lock_id_for_key(&k)).await, (1, 0));
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_many_with_duration_max_waits_for_the_holder() {
    let db = shared_db().await;
    let (holder, waiter) = (manager(db, "holder"), manager(db, "waiter"));
    let observer = db.connect().await.unwrap();
    let (free, busy) = (key("free"), key("busy"));
    let held = holder.acquire(&busy, None).await.unwrap();
    let taking = {
        let keys = [free.clone(), busy.clone()];
        tokio::spawn(async move { acquire_many(&waiter, &keys, Some(Duration::MAX)).await })
    };
    wait_for_waiters(&observer, lock_id_for_key(&busy), 1).await;
    held.release().await.unwrap();
    let set = taking.await.expect("no panic").expect("granted");
    assert_eq!(set.keys().count(), 2);
    for k in [&free, &busy] {
        assert_eq!(
            lock_rows(&observer, lock_id_for_key(k)).await,
            (1, 0),
            "{k}"
        );
    }
    set.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_acquire_with_duration_max_waits_for_a_permit() {
    let db = shared_db().await;
    let name = key("semaphore");
    let holder = Semaphore::new(manager(db, "holder"), name.clone(), 1).unwrap();
    let permit = holder.acquire(None).await.unwrap();
    let slot = lock_id_for_key(permit.key());
    let observer = db.connect().await.unwrap();
    // Long pauses: between its looks the waiter stays queued on the slot.
    let waiter = Semaphore::new(manager(db, "waiter"), name, 1)
        .unwrap()
        .max_pause(Duration::from_secs(3600));
    let taking = tokio::spawn(async move { waiter.acquire(Some(Duration::MAX)).await });
    wait_for_waiters(&observer, slot, 1).await;
    permit.release().await.unwrap();
    let granted = taking.await.expect("no panic").expect("a permit");
    assert_eq!(granted.slot(), 0);
    // The only permit is the waiter's now.
    assert!(holder.try_acquire().await.unwrap().is_none());
    granted.release().await.unwrap();
}

/// `acquire_xact` with `timeout`, against a key held by a manager that
/// lets go once the call is queued: granted, the caller's `lock_timeout`
/// put back.
async fn xact_waits_for_the_holder(timeout: Duration) {
    let db = shared_db().await;
    let holder = manager(db, "holder");
    let observer = db.connect().await.unwrap();
    let mut client = db.connect().await.unwrap();
    let k = key("xact");
    let id = lock_id_for_key(&k);
    let held = holder.acquire(&k, None).await.unwrap();
    let tx = client.transaction().await.unwrap();
    let lock = {
        let mut taking = pin!(acquire_xact(&tx, &k, Some(timeout)));
        tokio::select! {
            early = &mut taking => panic!("{timeout:?}: over before the holder let go: {early:?}"),
            () = wait_for_waiters(&observer, id, 1) => {}
        }
        held.release().await.unwrap();
        taking.await.unwrap_or_else(|e| panic!("{timeout:?}: {e}"))
    };
    assert_eq!(lock.lock_id, id);
    assert_eq!(lock_rows(&observer, id).await, (1, 0));
    let setting: String = tx
        .query_one("SELECT current_setting('lock_timeout')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(setting, "0", "the session's own lock_timeout is back");
    tx.commit().await.unwrap();
    assert_eq!(lock_rows(&observer, id).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_xact_with_duration_max_waits_for_the_holder() {
    xact_waits_for_the_holder(Duration::MAX).await;
}

/// 30 days used to be sent as `lock_timeout = '2592000000ms'`, over
/// PostgreSQL's INT_MAX ms, and failed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_xact_beyond_the_largest_lock_timeout_waits_for_the_holder() {
    xact_waits_for_the_holder(MONTH).await;
}
