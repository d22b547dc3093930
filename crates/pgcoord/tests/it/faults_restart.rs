//! Fault injection: the server restarts (`pg_ctl restart`, fast and
//! immediate) under a manager holding and waiting for locks.
//!
//! Every guard reports the loss; while the server is down acquisitions fail
//! with a typed error within the caller's timeout; once it is back the same
//! manager (same process) works again, and nothing leaks. A set of keys
//! that `acquire_many` is taking when the server restarts is taken again
//! within its timeout.

use crate::common;
use crate::fault_support;

use std::sync::Arc;
use std::time::Duration;

use fault_support::*;
use pgcoord::{error::BackendErrorKind, lock_id_for_key, DistributedLock, LockRegistry};
use pgcoord_testkit::locks::{eventually, eventually_async};
use pgcoord_testkit::pg::{StopMode, TestCluster};

const SECS: Duration = Duration::from_secs(30);

async fn blocking(
    cluster: &Arc<TestCluster>,
    f: impl FnOnce(&TestCluster) -> pgcoord::Result<()> + Send + 'static,
) {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || f(&c))
        .await
        .unwrap()
        .unwrap();
}

async fn restart_case(mode: StopMode) {
    let (cluster, db) = private_db(&[]).await;
    let holder = format!("restart-{mode:?}");
    let m = common::manager(&db, &holder);
    let blocker = common::manager(&db, "blocker");
    let client = db.connect().await.unwrap();

    // Uncontended locks on the batched sessions, one on a dedicated session
    // (taken after a wait), and a waiter still queued.
    let mut guards = Vec::new();
    for i in 0..20 {
        guards.push(
            m.acquire(&key(&format!("shared-{i}")), Some(SECS))
                .await
                .unwrap(),
        );
    }
    let (contended, queued) = (key("contended"), key("queued"));
    let held = blocker.acquire(&contended, None).await.unwrap();
    let blocked = blocker.acquire(&queued, None).await.unwrap();
    let m2 = m.clone();
    let k2 = contended.clone();
    let taker = tokio::spawn(async move { m2.acquire(&k2, Some(SECS)).await });
    common::wait_for_waiters(&client, lock_id_for_key(&contended), 1).await;
    held.release().await.unwrap();
    guards.push(taker.await.unwrap().unwrap());
    let m2 = m.clone();
    let k2 = queued.clone();
    let waiter = tokio::spawn(async move { m2.acquire(&k2, None).await });
    common::wait_for_waiters(&client, lock_id_for_key(&queued), 1).await;
    assert_eq!(m.held_lock_count(), 21);
    drop(client);

    blocking(&cluster, move |c| c.stop(mode)).await;

    for g in &guards {
        assert_lost(g, &g.info().key).await;
    }
    let err = tokio::time::timeout(SECS, waiter)
        .await
        .expect("the unbounded wait hung after the server went down")
        .unwrap()
        .unwrap_err();
    assert!(err.as_backend().is_some(), "{err:?}");
    eventually("registry empty", SECS, || m.held_lock_count() == 0).await;
    eventually("sessions closed", SECS, || m.session_count() == 0).await;
    drop(blocked);

    // Down: typed errors within the caller's timeout, with or without one.
    for timeout in [Some(Duration::from_secs(2)), Some(Duration::ZERO), None] {
        let k = key("down");
        let err = tokio::time::timeout(SECS, m.acquire(&k, timeout))
            .await
            .unwrap_or_else(|_| panic!("acquire({timeout:?}) hung while the server was down"))
            .unwrap_err();
        let kind = err.as_backend().map(|b| b.kind());
        assert!(
            kind == Some(BackendErrorKind::Connect) || err.is_timeout(),
            "acquire({timeout:?}) while down: {err:?}"
        );
        assert_eq!(err.key(), Some(k.as_str()));
    }
    let err = tokio::time::timeout(SECS, m.try_lock(&key("down")))
        .await
        .expect("try_lock hung while the server was down")
        .unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Connect),
        "{err:?}"
    );
    assert_eq!(m.held_lock_count(), 0);
    assert_eq!(m.session_count(), 0);

    blocking(&cluster, |c| c.start_again()).await;

    // Back: the same manager works again, on new sessions.
    let g = m.acquire(&key("back"), Some(SECS)).await.unwrap();
    assert!(!g.is_lost());
    let lost_key = guards[0].info().key.clone();
    let again = m.acquire(&lost_key, Some(SECS)).await.unwrap();
    // Contended waits too (the wait sessions pooled before the restart are gone).
    let client = db.connect().await.unwrap();
    let after = key("contended-after");
    let held = blocker.acquire(&after, None).await.unwrap();
    let m2 = m.clone();
    let k2 = after.clone();
    let taker = tokio::spawn(async move { m2.acquire(&k2, Some(SECS)).await });
    common::wait_for_waiters(&client, lock_id_for_key(&after), 1).await;
    held.release().await.unwrap();
    taker.await.unwrap().unwrap().release().await.unwrap();
    for old in guards {
        assert!(old.release().await.unwrap_err().is_lock_lost());
    }
    again.release().await.unwrap();
    g.release().await.unwrap();
    assert_eq!(advisory_locks(&client).await, 0);
    m.close().await.unwrap();
    blocker.close().await.unwrap();
    eventually_async("no server session left", || async {
        sessions_of(&client, &holder).await == 0
    })
    .await;
    assert_eq!(m.session_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_restart_reports_loss_and_recovers() {
    restart_case(StopMode::Fast).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_restart_reports_loss_and_recovers() {
    restart_case(StopMode::Immediate).await;
}

/// `acquire_many` holds the lower keys of a set and waits for the highest,
/// held by another manager, when the server restarts (immediate): every
/// session ends, the other holder's with it, and the set is taken again
/// within its timeout instead of failing with the session's end or the
/// server's 57P03 refusal while it shuts down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_waiting_through_a_restart_is_taken_again() {
    use pgcoord::coordination::acquire_many;
    let (cluster, db) = private_db(&[]).await;
    let (mine, theirs) = (
        common::manager(&db, "set-taker"),
        common::manager(&db, "blocker"),
    );
    let mut keys: Vec<String> = ["ma", "mb", "mc"].iter().map(|k| key(k)).collect();
    keys.sort_by_key(|k| lock_id_for_key(k));
    let blocker = theirs.acquire(&keys[2], None).await.unwrap();
    let (m, ks) = (mine.clone(), keys.clone());
    let set =
        tokio::spawn(async move { acquire_many(&m, &ks, Some(Duration::from_secs(60))).await });
    let client = db.connect().await.unwrap();
    common::wait_for_waiters(&client, lock_id_for_key(&keys[2]), 1).await;
    // pg_locks rows: two keys of the set, the blocker's, the set's wait.
    assert_eq!(advisory_locks(&client).await, 4);
    drop(client);

    blocking(&cluster, |c| c.restart(StopMode::Immediate)).await;

    assert_lost(&blocker, "the blocker's key").await;
    let set = set
        .await
        .unwrap()
        .expect("the set taken again after the restart");
    assert_eq!(set.len(), 3);
    assert!(!set.is_lost(), "a key of the set is lost");
    let client = db.connect().await.unwrap();
    assert_eq!(
        advisory_locks(&client).await,
        3,
        "the whole set, on the new server"
    );
    set.release().await.unwrap();
    assert_eq!(advisory_locks(&client).await, 0);
    mine.close().await.unwrap();
    theirs.close().await.unwrap();
}
