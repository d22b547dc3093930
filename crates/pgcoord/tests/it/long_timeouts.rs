//! Timeouts too long for a deadline (`Some(Duration::MAX)`) wait as long
//! as it takes, as `None` does and as `PostgresLockManager::acquire`
//! always did: `acquire_many` and `Semaphore::acquire` used to panic
//! computing theirs (`Instant + Duration` overflowed).
//!
//! Each call waits for a key held elsewhere; once it is seen queued on
//! the server, the holder lets go, and the call must then succeed.

use crate::common;

use std::time::Duration;

use common::{lock_rows, manager, shared_db, wait_for_waiters};
use pgcoord::coordination::{acquire_many, Semaphore};
use pgcoord::{lock_id_for_key, DistributedLock};

fn key(name: &str) -> String {
    format!("long-timeout:{name}:{}", uuid::Uuid::new_v4())
}

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
