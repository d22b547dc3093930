//! Managers take turns on a contended key: a manager's next waiting task
//! joins PostgreSQL's queue only once the grant before it is unlocked, so
//! a process that queued while that grant was held comes first.

use crate::common;
use crate::fault_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fault_support::*;
use pgcoord::{lock_id_for_key, DistributedLock, LockRegistry};
use pgcoord_testkit::locks::{eventually, eventually_async};
use tokio::sync::oneshot;

const SECS: Duration = Duration::from_secs(30);

/// Whether a session of `holder` waits in PostgreSQL's queue for `lock_id`.
async fn waits_in_server(client: &tokio_postgres::Client, holder: &str, lock_id: i64) -> bool {
    client
        .query_one(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
             WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND NOT l.granted \
             AND ((l.classid::int8 << 32) | l.objid::int8) = $1 \
             AND a.application_name = $2",
            &[&lock_id, &format!("eventsource/{holder}")],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        > 0
}

/// Leaves `a` with two idle dedicated sessions (two keys it waited for at
/// once), so a wait it sends needs no connect: without this, a next wait
/// sent at the grant could lose the race to B's by connecting first.
async fn warm_two_wait_sessions(
    a: &pgcoord::PostgresLockManager,
    b: &pgcoord::PostgresLockManager,
) {
    let keys = [key("warm-1"), key("warm-2")];
    let mut held = Vec::new();
    for k in &keys {
        held.push(b.acquire(k, None).await.unwrap());
    }
    let waits: Vec<_> = keys
        .iter()
        .map(|k| {
            let (a, k) = (a.clone(), k.clone());
            tokio::spawn(async move { a.acquire(&k, Some(SECS)).await.unwrap().release().await })
        })
        .collect();
    eventually("A waits for both", SECS, || a.waiting_tasks() == 2).await;
    for g in held {
        g.release().await.unwrap();
    }
    for w in waits {
        w.await.unwrap().unwrap();
    }
}

/// A task that takes `k` once, notes `label` in `order` and lets go.
fn take_once(
    m: &pgcoord::PostgresLockManager,
    k: &str,
    label: &'static str,
    order: &Arc<Mutex<Vec<&'static str>>>,
) -> tokio::task::JoinHandle<()> {
    let (m, k, order) = (m.clone(), k.to_owned(), order.clone());
    tokio::spawn(async move {
        let g = m.acquire(&k, Some(SECS)).await.unwrap();
        order.lock().unwrap().push(label);
        g.release().await.unwrap();
    })
}

/// B holds the key while two tasks of A wait; B hands it over and, while
/// A's first task holds it, queues again. B must come before A's second
/// task: a line that queued its next wait at the grant was ahead of B, and
/// a manager releasing and re-acquiring a key got one grant in three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_that_queued_during_a_hold_goes_before_the_holders_next_task() {
    let (_cluster, db) = private_db(&[]).await;
    let client = db.connect().await.unwrap();
    let k = key("turns");
    let id = lock_id_for_key(&k);
    let a = common::manager(&db, "turns-a");
    let b = common::manager(&db, "turns-b");
    warm_two_wait_sessions(&a, &b).await;
    let b_first = b.acquire(&k, None).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));

    let (holding_tx, holding_rx) = oneshot::channel();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let a1 = {
        let (a, k, order) = (a.clone(), k.clone(), order.clone());
        tokio::spawn(async move {
            let g = a.acquire(&k, Some(SECS)).await.unwrap();
            order.lock().unwrap().push("a1");
            holding_tx.send(()).unwrap();
            go_rx.await.unwrap();
            g.release().await.unwrap();
        })
    };
    eventually("A's first task waits", SECS, || a.waiting_tasks() == 1).await;
    let a2 = take_once(&a, &k, "a2", &order);
    eventually("A's second task waits", SECS, || a.waiting_tasks() == 2).await;
    common::wait_for_waiters(&client, id, 1).await;

    b_first.release().await.unwrap();
    holding_rx.await.unwrap();
    let b_again = take_once(&b, &k, "b", &order);
    eventually_async("B waits in the server's queue", || {
        waits_in_server(&client, "turns-b", id)
    })
    .await;
    // A's second task has not queued in the server behind its first task's
    // grant: one manager, one session for the key.
    assert!(!waits_in_server(&client, "turns-a", id).await);
    go_tx.send(()).unwrap();
    for t in [a1, a2, b_again] {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), ["a1", "b", "a2"]);
    assert_eq!(a.held_lock_count() + b.held_lock_count(), 0);
    a.close().await.unwrap();
    b.close().await.unwrap();
}
