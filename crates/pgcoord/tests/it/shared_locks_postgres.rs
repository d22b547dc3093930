//! Shared (reader-writer) locks of `PostgresLockManager` against a real
//! PostgreSQL: the shared-lock conformance suite, then what the server
//! shows and keeps: modes and counts in `pg_locks`, interop with plain
//! `pg_advisory_lock_shared` callers, fairness inside PostgreSQL's queue,
//! downgrades on both kinds of session, and loss.

use crate::common;

use std::time::Duration;

use common::{manager, terminate, wait_for_waiters};
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock, LockMode, LockRegistry, SharedLock};
use pgcoord_testkit::locks::{eventually, eventually_async};
use pgcoord_testkit::pg::TestDatabase;

pgcoord_testkit::shared_lock_conformance_tests!(|| async {
    let db = TestDatabase::create().await.expect("test database");
    (manager(&db, "primary"), manager(&db, "observer"), db)
});

const WAIT: Option<Duration> = Some(Duration::from_secs(30));

fn key(name: &str) -> String {
    format!("rw:{name}:{}", uuid::Uuid::new_v4())
}

/// (mode, granted, pid) of every pg_locks row of `lock_id`.
async fn rows(client: &tokio_postgres::Client, lock_id: i64) -> Vec<(String, bool, i32)> {
    let rows = client
        .query(
            "SELECT mode, granted, pid FROM pg_locks WHERE locktype = 'advisory' \
             AND objsubid = 1 AND ((classid::int8 << 32) | objid::int8) = $1 ORDER BY pid",
            &[&lock_id],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

fn granted_in(rows: &[(String, bool, i32)], mode: &str) -> usize {
    rows.iter().filter(|r| r.0 == mode && r.1).count()
}

/// Three shared holds of one manager are three `ShareLock` rows on three
/// sessions; each release takes exactly one away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_shared_hold_is_one_share_lock_on_its_own_session() {
    let db = &TestDatabase::create().await.unwrap();
    let (locks, sql) = (manager(db, "readers"), db.connect().await.unwrap());
    let k = key("rows");
    let id = lock_id_for_key(&k);
    let mut guards = Vec::new();
    for _ in 0..3 {
        guards.push(locks.acquire_shared(&k, WAIT).await.unwrap());
    }
    let seen = rows(&sql, id).await;
    assert_eq!(granted_in(&seen, "ShareLock"), 3, "{seen:?}");
    let pids: std::collections::HashSet<i32> = seen.iter().map(|r| r.2).collect();
    assert_eq!(pids.len(), 3, "one session per shared hold: {seen:?}");
    assert_eq!(locks.held_lock_count(), 3);
    for left in (0..3).rev() {
        guards.pop().unwrap().release().await.unwrap();
        assert_eq!(granted_in(&rows(&sql, id).await, "ShareLock"), left);
    }
    assert_eq!(locks.held_lock_count(), 0);
}

/// The manager's shared holds and a plain SQL client's coexist on the same
/// advisory id; the SQL client's exclusive request waits for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_holds_interoperate_with_plain_sql() {
    let db = &TestDatabase::create().await.unwrap();
    let locks = manager(db, "rw");
    let (other, sql) = (db.connect().await.unwrap(), db.connect().await.unwrap());
    let k = key("interop");
    let id = lock_id_for_key(&k);
    other
        .execute("SELECT pg_advisory_lock_shared($1)", &[&id])
        .await
        .unwrap();
    let g = locks
        .try_lock_shared(&k)
        .await
        .unwrap()
        .expect("shares with SQL");
    let writer = db.connect().await.unwrap();
    let wait = tokio::spawn(async move {
        writer
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        writer
    });
    wait_for_waiters(&sql, id, 1).await;
    assert!(
        locks.try_lock_shared(&k).await.unwrap().is_none(),
        "a reader passed the queued SQL writer"
    );
    g.release().await.unwrap();
    other
        .execute("SELECT pg_advisory_unlock_shared($1)", &[&id])
        .await
        .unwrap();
    let writer = wait.await.unwrap();
    assert_eq!(granted_in(&rows(&sql, id).await, "ExclusiveLock"), 1);
    drop(writer);
}

/// Many local readers keep arriving while a writer of another manager
/// waits: the writer is served, then the readers that queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_readers_do_not_starve_a_remote_writer() {
    let db = &TestDatabase::create().await.unwrap();
    let (readers, writers) = (manager(db, "readers"), manager(db, "writers"));
    let sql = db.connect().await.unwrap();
    let k = key("starve");
    let id = lock_id_for_key(&k);
    let first = readers.acquire_shared(&k, WAIT).await.unwrap();
    let writer = {
        let (w, k) = (writers.clone(), k.clone());
        tokio::spawn(async move { w.acquire(&k, WAIT).await.unwrap() })
    };
    wait_for_waiters(&sql, id, 1).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut late = Vec::new();
    for i in 0..8 {
        let (r, k, tx) = (readers.clone(), k.clone(), tx.clone());
        late.push(tokio::spawn(async move {
            let g = r.acquire_shared(&k, WAIT).await.unwrap();
            tx.send(i).unwrap();
            g.release().await.unwrap();
        }));
    }
    // All eight queue in PostgreSQL behind the writer (none is granted).
    wait_for_waiters(&sql, id, 9).await;
    assert!(rx.try_recv().is_err(), "a reader passed the writer");
    assert_eq!(readers.waiting_tasks(), 8, "waiting readers are counted");
    assert_eq!(writers.waiting_tasks(), 1);
    first.release().await.unwrap();
    let w = writer.await.unwrap();
    assert!(rx.try_recv().is_err(), "a reader shares with the writer");
    w.release().await.unwrap();
    for t in late {
        t.await.unwrap();
    }
    let mut served: Vec<i32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    served.sort();
    assert_eq!(served, (0..8).collect::<Vec<_>>());
}

/// A downgrade of a lock taken after a wait (on a dedicated session) keeps
/// a queued writer out until the shared hold is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_after_a_wait_keeps_the_queued_writer_out() {
    let db = &TestDatabase::create().await.unwrap();
    let (a, b) = (manager(db, "a"), manager(db, "b"));
    let sql = db.connect().await.unwrap();
    let k = key("downgrade-wait");
    let id = lock_id_for_key(&k);
    let blocker = b.acquire(&k, WAIT).await.unwrap();
    let waiting = {
        let (a, k) = (a.clone(), k.clone());
        tokio::spawn(async move { a.acquire(&k, WAIT).await.unwrap() })
    };
    wait_for_waiters(&sql, id, 1).await;
    blocker.release().await.unwrap();
    let g = waiting.await.unwrap();
    let writer = {
        let (b, k) = (b.clone(), k.clone());
        tokio::spawn(async move { b.acquire(&k, WAIT).await.unwrap() })
    };
    wait_for_waiters(&sql, id, 1).await;
    let g = g.downgrade().await.unwrap();
    assert_eq!(g.mode(), LockMode::Shared);
    let seen = rows(&sql, id).await;
    assert_eq!(granted_in(&seen, "ShareLock"), 1, "{seen:?}");
    assert_eq!(granted_in(&seen, "ExclusiveLock"), 0, "{seen:?}");
    assert!(
        !writer.is_finished(),
        "the writer got in during the downgrade"
    );
    g.release().await.unwrap();
    let w = writer.await.unwrap();
    w.release().await.unwrap();
    eventually("a holds nothing", Duration::from_secs(10), || {
        a.held_lock_count() == 0
    })
    .await;
}

/// A downgraded lock on a batched session is unlocked in shared mode: the
/// session then holds nothing of the key, and its other locks stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgraded_lock_on_a_shared_session_is_unlocked_in_shared_mode() {
    let db = &TestDatabase::create().await.unwrap();
    let locks = PostgresLockManager::builder(db.config().into())
        .batched_sessions(1)
        .build()
        .unwrap();
    let sql = db.connect().await.unwrap();
    let (k, other) = (key("downgrade-shared"), key("neighbour"));
    let neighbour = locks.acquire(&other, WAIT).await.unwrap();
    let g = locks.acquire(&k, WAIT).await.unwrap();
    let g = g.downgrade().await.unwrap();
    let seen = rows(&sql, lock_id_for_key(&k)).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, "ShareLock");
    assert_eq!(locks.batched_session_pids(), vec![seen[0].2]);
    assert!(
        locks.try_lock(&k).await.unwrap().is_none(),
        "own exclusive re-entered"
    );
    g.release().await.unwrap();
    assert!(rows(&sql, lock_id_for_key(&k)).await.is_empty());
    assert_eq!(rows(&sql, lock_id_for_key(&other)).await.len(), 1);
    neighbour.release().await.unwrap();
}

/// A shared hold whose session is terminated is lost, and the writer waiting
/// behind it gets the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_reader_loses_its_hold() {
    let db = &TestDatabase::create().await.unwrap();
    let (readers, writers) = (manager(db, "readers"), manager(db, "writers"));
    let sql = db.connect().await.unwrap();
    let k = key("loss");
    let id = lock_id_for_key(&k);
    let g = readers.acquire_shared(&k, WAIT).await.unwrap();
    let writer = {
        let (w, k) = (writers.clone(), k.clone());
        tokio::spawn(async move { w.acquire(&k, WAIT).await.unwrap() })
    };
    wait_for_waiters(&sql, id, 1).await;
    let pid = rows(&sql, id).await.into_iter().find(|r| r.1).unwrap().2;
    terminate(&sql, pid).await;
    tokio::time::timeout(Duration::from_secs(30), g.lost())
        .await
        .expect("the reader is told of the loss");
    let w = writer.await.unwrap();
    assert!(g.release().await.unwrap_err().is_lock_lost());
    w.release().await.unwrap();
    eventually_async("the loss is counted", || async {
        readers.held_lock_count() == 0
    })
    .await;
}

/// Fencing managers take shared holds without a token, and a single-session
/// manager takes its one shared hold on its own session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_and_single_session_managers_take_shared_holds() {
    let db = &TestDatabase::create().await.unwrap();
    let fenced = PostgresLockManager::builder(db.config().into())
        .fencing(true)
        .build()
        .unwrap();
    fenced.install_fencing().await.unwrap();
    let single = PostgresLockManager::builder(db.config().into())
        .single_session(true)
        .build()
        .unwrap();
    let k = key("modes");
    let a = fenced.acquire_shared(&k, WAIT).await.unwrap();
    assert_eq!(a.fence(), None);
    let b = single.acquire_shared(&k, WAIT).await.unwrap();
    let sql = db.connect().await.unwrap();
    let seen = rows(&sql, lock_id_for_key(&k)).await;
    assert_eq!(granted_in(&seen, "ShareLock"), 2, "{seen:?}");
    assert!(seen
        .iter()
        .any(|r| single.batched_session_pids().contains(&r.2)));
    let again = single.acquire_shared(&k, WAIT).await.unwrap_err();
    assert!(again.to_string().contains("budget"), "{again}");
    // Its one session must not be granted the key exclusively as well.
    let exclusive = single.try_lock(&k).await.unwrap_err();
    assert!(exclusive.to_string().contains("budget"), "{exclusive}");
    a.release().await.unwrap();
    b.release().await.unwrap();
    let w = fenced.acquire(&k, WAIT).await.unwrap();
    assert!(w.fence().is_some());
    w.release().await.unwrap();
}

/// With every wait session in use by shared holds, another one is refused
/// as such, for a try and for a wait that times out: the key is free, and
/// a timeout would say it is held elsewhere (`is_conflict`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_wait_sessions_are_not_a_key_held_elsewhere() {
    use pgcoord::error::AcquireFailure;
    let db = &TestDatabase::create().await.unwrap();
    let locks = PostgresLockManager::builder(db.config().into())
        .max_wait_sessions(2)
        .build()
        .unwrap();
    let (a, b) = (
        locks.acquire_shared(&key("a"), WAIT).await.unwrap(),
        locks.acquire_shared(&key("b"), WAIT).await.unwrap(),
    );
    let free = key("free");
    for timeout in [Some(Duration::ZERO), Some(Duration::from_millis(200))] {
        let err = locks.acquire_shared(&free, timeout).await.unwrap_err();
        let failure = err.as_lock_acquisition().expect("an acquisition error");
        assert!(
            matches!(
                failure.reason,
                AcquireFailure::WaitSessionsBusy { limit: 2 }
            ),
            "{timeout:?}: {err:?}"
        );
        assert!(!failure.is_conflict(), "{err}");
        assert!(err.to_string().contains("max_wait_sessions"), "{err}");
    }
    drop(a);
    let c = locks.acquire_shared(&free, WAIT).await.unwrap();
    drop((b, c));
}
