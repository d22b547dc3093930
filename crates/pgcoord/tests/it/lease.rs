//! Lease mode: a holder that goes silent loses its locks to a waiter about
//! a lease later, and its own loss signal has fired by then; a live idle
//! holder keeps its locks for as long as it likes.
//!
//! No timing is asserted: the figures (how long after the silence the
//! waiter got the lock) are printed for the record; what is asserted is the
//! order of events, which lease mode guarantees by construction.

use crate::common;
use crate::fault_support;

use std::time::{Duration, Instant};

use fault_support::*;
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock};

const LEASE: Duration = Duration::from_secs(2);

/// Trials: one in the suite, ten with `EVENTSOURCE_STRESS=1`.
fn trials() -> usize {
    if std::env::var("EVENTSOURCE_STRESS").is_ok_and(|v| v == "1") {
        10
    } else {
        1
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_holder_loses_its_locks_to_a_waiter_and_knows_first() {
    for trial in 0..trials() {
        silent_holder_trial(trial).await;
    }
}

async fn silent_holder_trial(trial: usize) {
    let (_cluster, db) = private_db(&[]).await;
    let proxy = Proxy::start(db.config().get_ports()[0]).await;
    let config: tokio_postgres::Config =
        format!("postgres://postgres@127.0.0.1:{}/{}", proxy.port, db.name())
            .parse()
            .unwrap();
    let holder = PostgresLockManager::builder(config.into())
        .holder_id("leased")
        .lease(LEASE)
        .build()
        .unwrap();
    let direct = common::manager(&db, "waiter");
    let client = db.connect().await.unwrap();

    // Locks on the batched sessions, and one on a dedicated session (taken
    // after a wait, so its grant needed a confirmation of its own).
    let mut guards = Vec::new();
    for i in 0..5 {
        let k = key(&format!("leased-{i}"));
        guards.push((
            k.clone(),
            holder.acquire(&k, Some(LEASE * 10)).await.unwrap(),
        ));
    }
    let contended = key("leased-dedicated");
    let blocker = direct.acquire(&contended, None).await.unwrap();
    let taker = {
        let (h, k) = (holder.clone(), contended.clone());
        tokio::spawn(async move { h.acquire(&k, Some(LEASE * 10)).await })
    };
    common::wait_for_waiters(&client, lock_id_for_key(&contended), 1).await;
    blocker.release().await.unwrap();
    guards.push((contended, taker.await.unwrap().unwrap()));
    assert!(guards.iter().all(|(_, g)| !g.is_lost()));

    proxy.set_mode(ProxyMode::BlackHole);
    let silent_since = Instant::now();
    for (k, g) in &guards {
        // Granted to the waiter only once the server ended the silent
        // session, which it does a lease after its last statement.
        let taken = direct
            .acquire(k, Some(LEASE * 15))
            .await
            .expect("waiter gets the lock");
        assert!(
            g.is_lost(),
            "the silent holder must count its lock lost before anyone else gets it"
        );
        println!(
            "trial {trial}: lease {LEASE:?}: lock {k} taken over {:?} after the holder went silent",
            silent_since.elapsed()
        );
        taken.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_idle_holder_keeps_its_locks_past_many_leases() {
    let (_cluster, db) = private_db(&[]).await;
    let holder = PostgresLockManager::builder(db.config().into())
        .holder_id("idle")
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let k = key("idle");
    let g = holder.acquire(&k, None).await.unwrap();
    // Time passing is the point here: three leases with nothing to do but ping.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert!(!g.is_lost(), "pings inside the lease keep the session");
    let client = db.connect().await.unwrap();
    assert_eq!(
        common::lock_rows(&client, lock_id_for_key(&k)).await,
        (1, 0)
    );
    g.release().await.unwrap();
}
