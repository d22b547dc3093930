//! The no-step-down soak: with no faults, a leader keeps its leadership.
//!
//! `EVENTSOURCE_SOAK_SECS=N` runs it for N seconds; unset, it says so and
//! passes (it is a soak, not a check for every run of the suite). A
//! fencing manager in lease mode wins two elections, one at once (its lock
//! on a batched session, which goes on batching the manager's try-locks)
//! and one after waiting for a rival to resign (its lock on a dedicated
//! session, idle but for the lease's pings), then does ordinary work with
//! the same manager for N seconds: contended locks against a second
//! manager (which opens and closes dedicated sessions next to the
//! leader's), sets of keys, a semaphore, `holders()`; a rival manager
//! campaigns in both elections with a timeout all along. Once a second,
//! from a plain connection, for each election: its lock is held by the
//! same backend (same pid, same `backend_start`: the session under the
//! leader was never replaced), the fence table still says the leader's
//! term, `leader()` reports the same leader and term, and the leadership
//! is not lost. The loss signals are watched the whole time, every rival
//! campaign must time out, and the ordinary work must see no error but
//! timeouts.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::coordination::{acquire_many, election_key, Election, Leadership, Semaphore};
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock};
use pgcoord_testkit::pg::TestDatabase;

const LEASE: Duration = Duration::from_secs(2);

fn fenced(db: &TestDatabase, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(db.config().into())
        .holder_id(holder)
        .fencing(true)
        .lease(LEASE)
        .build()
        .unwrap()
}

/// What ordinary work counted: operations done, timeouts, other errors.
#[derive(Default)]
struct Work {
    ops: AtomicU64,
    timeouts: AtomicU64,
    errors: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Work {
    fn count<T>(&self, r: pgcoord::Result<T>) -> Option<T> {
        match r {
            Ok(v) => {
                self.ops.fetch_add(1, Ordering::Relaxed);
                Some(v)
            }
            Err(e) if e.is_timeout() => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.first_error
                    .lock()
                    .unwrap()
                    .get_or_insert(e.to_string());
                None
            }
        }
    }
}

/// The backend holding the election's lock and its `backend_start`.
async fn holder_session(client: &tokio_postgres::Client, id: i64) -> Option<(i32, String)> {
    client
        .query_opt(
            "SELECT l.pid, a.backend_start::text FROM pg_locks l JOIN pg_stat_activity a \
             USING (pid) WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted \
             AND ((l.classid::int8 << 32) | l.objid::int8) = $1",
            &[&id],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1)))
}

/// Spawns a task of ordinary work on `m` (and, contending, `other`) until `stop`.
fn ordinary_work(
    kind: u64,
    m: PostgresLockManager,
    other: PostgresLockManager,
    work: Arc<Work>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let sem = Semaphore::new(m.clone(), "soak-sem", 2).unwrap();
        let mut i = kind;
        while !stop.load(Ordering::Relaxed) {
            i = i
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("soak:{}", (i >> 33) % 6);
            let t = Some(Duration::from_secs(2));
            match kind {
                0 | 1 => {
                    let locks = if kind == 0 { &m } else { &other };
                    if let Some(g) = work.count(locks.acquire(&key, t).await) {
                        tokio::time::sleep(Duration::from_millis((i >> 40) % 5)).await;
                        work.count(g.release().await);
                    }
                }
                2 => {
                    let keys = [
                        key.clone(),
                        format!("soak:{}", (i >> 20) % 6),
                        "soak:x".into(),
                    ];
                    if let Some(set) = work.count(acquire_many(&m, &keys, t).await) {
                        work.count(set.release().await);
                    }
                }
                3 => {
                    if let Some(p) = work.count(sem.acquire(t).await) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        work.count(p.release().await);
                    }
                }
                _ => {
                    work.count(m.holders(&[&key]).await);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// One election the leader holds, and what must not change under it.
struct Held {
    election: Election<PostgresLockManager>,
    leading: Leadership,
    id: i64,
    session: (i32, String),
}

impl Held {
    async fn new(locks: &PostgresLockManager, name: &str, client: &tokio_postgres::Client) -> Held {
        let election = Election::new(locks.clone(), name).expect("a fencing lock manager");
        let leading = election
            .campaign(Some(Duration::from_secs(10)))
            .await
            .unwrap();
        let id = lock_id_for_key(election.key());
        let session = holder_session(client, id)
            .await
            .expect("the leader's session");
        Held {
            election,
            leading,
            id,
            session,
        }
    }

    /// Asserts that nothing moved under the leader.
    async fn look(&self, client: &tokio_postgres::Client, after: Duration) {
        let what = format!("election {} after {after:?}", self.election.name());
        assert!(!self.leading.is_lost(), "{what}: lost");
        let now = holder_session(client, self.id).await;
        assert_eq!(
            now.as_ref(),
            Some(&self.session),
            "{what}: the leader's session"
        );
        let fence: i64 = client
            .query_one(
                "SELECT fence FROM eventsource_lock_fences WHERE lock_id = $1",
                &[&self.id],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(fence, self.leading.term() as i64, "{what}: the term moved");
        let seen = self.election.leader().await.unwrap().expect("a leader");
        let expected = (Some(self.session.0), Some(self.leading.term()));
        assert_eq!(
            (seen.pid, seen.term),
            expected,
            "{what}: the observed leader"
        );
        assert_eq!(seen.holder_id.as_deref(), Some("soak-leader"), "{what}");
    }
}

/// A rival campaigning for `name` with a short timeout until `stop`: it
/// must time out every time.
fn rival(
    locks: PostgresLockManager,
    name: &str,
    stop: Arc<AtomicBool>,
    tries: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    let election = Election::new(locks, name).expect("a fencing lock manager");
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let err = election
                .campaign(Some(Duration::from_millis(300)))
                .await
                .unwrap_err();
            assert!(err.is_timeout(), "a rival campaign: {err}");
            tries.fetch_add(1, Ordering::Relaxed);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_without_faults_never_steps_down() {
    let Some(secs) = std::env::var("EVENTSOURCE_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        eprintln!("election soak skipped: set EVENTSOURCE_SOAK_SECS=N to run it for N seconds");
        return;
    };
    let db = TestDatabase::create().await.unwrap();
    let client = db.connect().await.unwrap();
    let leader_locks = fenced(&db, "soak-leader");
    leader_locks.install_fencing().await.unwrap();
    let (other, rival_locks) = (fenced(&db, "soak-other"), fenced(&db, "soak-rival"));
    let at_once = Held::new(&leader_locks, "soak-a", &client).await;
    // Won after a wait: the rival leads first, the leader queues.
    let first = Election::new(rival_locks.clone(), "soak-b")
        .expect("a fencing lock manager")
        .campaign(None)
        .await
        .unwrap();
    let waiting = {
        let (locks, client) = (leader_locks.clone(), db.connect().await.unwrap());
        tokio::spawn(async move { Held::new(&locks, "soak-b", &client).await })
    };
    pgcoord_testkit::locks::eventually_async("the leader queued", || async {
        client
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                 AND ((classid::int8 << 32) | objid::int8) = $1",
                &[&lock_id_for_key(&election_key("soak-b"))],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    })
    .await;
    first.resign().await.unwrap();
    let after_wait = waiting.await.unwrap();
    assert_ne!(
        at_once.session.0, after_wait.session.0,
        "two sessions hold the two elections"
    );
    let held = [at_once, after_wait];

    let (work, stop) = (Arc::new(Work::default()), Arc::new(AtomicBool::new(false)));
    let mut tasks: Vec<_> = (0..6)
        .map(|k| {
            ordinary_work(
                k % 5,
                leader_locks.clone(),
                other.clone(),
                work.clone(),
                stop.clone(),
            )
        })
        .collect();
    let rival_tries = Arc::new(AtomicU64::new(0));
    for name in ["soak-a", "soak-b"] {
        tasks.push(rival(
            rival_locks.clone(),
            name,
            stop.clone(),
            rival_tries.clone(),
        ));
    }

    let start = Instant::now();
    let (mut samples, mut most_sessions, mut pids) = (0u64, 0usize, HashSet::new());
    while start.elapsed() < Duration::from_secs(secs) {
        tokio::select! {
            () = held[0].leading.lost() => panic!("soak-a lost after {:?}", start.elapsed()),
            () = held[1].leading.lost() => panic!("soak-b lost after {:?}", start.elapsed()),
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        for h in &held {
            h.look(&client, start.elapsed()).await;
        }
        let now: Vec<i32> = client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'eventsource/soak-leader'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        most_sessions = most_sessions.max(now.len());
        pids.extend(now);
        samples += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let (ops, timeouts, errors) = (
        work.ops.load(Ordering::Relaxed),
        work.timeouts.load(Ordering::Relaxed),
        work.errors.load(Ordering::Relaxed),
    );
    eprintln!(
        "election soak: {secs} s, lease {LEASE:?}: held throughout ({samples} looks): soak-a on \
         pid {} (term {}), soak-b (won after a wait) on pid {} (term {}); ordinary work on the \
         leader's manager: {ops} operations, {timeouts} timeouts, {errors} other errors; rival \
         campaigns timed out: {}; the leader's manager had up to {most_sessions} sessions at \
         once, {} distinct backends over the run",
        held[0].session.0,
        held[0].leading.term(),
        held[1].session.0,
        held[1].leading.term(),
        rival_tries.load(Ordering::Relaxed),
        pids.len(),
    );
    assert_eq!(
        errors,
        0,
        "ordinary work failed: {:?}",
        work.first_error.lock().unwrap()
    );
    assert!(ops > 0 && samples > 0, "nothing was done");
    for h in held {
        h.leading.resign().await.expect("still leading at the end");
    }
}
