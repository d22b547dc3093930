//! Leader election on PostgreSQL: the election suite of the testkit (two
//! fencing managers on a fresh database per case, a leader's hold ended by
//! `pg_terminate_backend`), then what only a real server shows: terms that
//! only grow across processes, a SIGKILLed leader's waiting candidate
//! leads, who leads is seen through `pg_locks`, and a manager without
//! fencing is refused.

use crate::common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{terminate, wait_for_waiters};
use futures_util::StreamExt;
use pgcoord::coordination::{election_key, Election};
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, Error, LockRegistry};
use pgcoord_testkit::coordination::election::LeadershipBreaker;
use pgcoord_testkit::pg::TestDatabase;

fn fencing_manager(config: tokio_postgres::Config, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(config.into())
        .holder_id(holder)
        .fencing(true)
        .build()
        .unwrap()
}

async fn fenced_db() -> TestDatabase {
    let db = TestDatabase::create().await.unwrap();
    fencing_manager(db.config(), "install")
        .install_fencing()
        .await
        .unwrap();
    db
}

/// Ends a hold as the server ends a session: `pg_terminate_backend` of the
/// backend holding the key's advisory lock. Keeps the case's database.
struct TerminateHolder(TestDatabase);

impl LeadershipBreaker for TerminateHolder {
    async fn end_hold(&self, key: &str) {
        let client = self.0.connect().await.unwrap();
        let pid: i32 = client
            .query_one(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 \
                 AND granted AND ((classid::int8 << 32) | objid::int8) = $1",
                &[&lock_id_for_key(key)],
            )
            .await
            .expect("a granted lock on the key")
            .get(0);
        terminate(&client, pid).await;
    }
}

pgcoord_testkit::election_conformance_tests!(|| async {
    let db = fenced_db().await;
    let primary = fencing_manager(db.config(), "primary");
    let observer = fencing_manager(db.config(), "observer");
    (primary, observer, TerminateHolder(db))
});

/// Run by `a_sigkilled_leader_is_followed_by_the_waiting_candidate` as a
/// child process: leads, prints its term, and waits to be killed.
#[tokio::test]
#[ignore = "a child process of the tests in this file"]
async fn election_child() {
    let var =
        |n: &str| std::env::var(n).expect("a child process, started by the tests in this file");
    let (url, name) = (var("ES_ELECT_URL"), var("ES_ELECT_NAME"));
    let election = Election::new(fencing_manager(url.parse().unwrap(), "child"), name)
        .expect("a fencing lock manager");
    let leading = election.campaign(None).await.unwrap();
    println!("LEADING term={}", leading.term());
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_across_managers_with_growing_terms() {
    let db = fenced_db().await;
    let leaders = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let election = Election::new(fencing_manager(db.config(), &format!("c{i}")), "jobs")
            .expect("a fencing lock manager");
        let (leaders, terms) = (leaders.clone(), terms.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let leading = election.campaign(None).await.unwrap();
                assert_eq!(leaders.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                terms.lock().unwrap().push(leading.term());
                leaders.fetch_sub(1, Ordering::SeqCst);
                leading.resign().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let terms = terms.lock().unwrap();
    assert_eq!(terms.len(), 40);
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "{terms:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_leader_is_followed_by_the_waiting_candidate() {
    let db = fenced_db().await;
    let name = format!("failover-{}", uuid::Uuid::new_v4());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(common::worker_args(module_path!(), "election_child"))
        .arg("--nocapture")
        .env("ES_ELECT_URL", db.url())
        .env("ES_ELECT_NAME", &name)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child_term: u64 = tokio::task::spawn_blocking(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(t) = line
                .trim()
                .rsplit("LEADING term=")
                .next()
                .filter(|_| line.contains("LEADING"))
            {
                return t.parse().unwrap();
            }
        }
        panic!("the child never led");
    })
    .await
    .unwrap();

    let election = Election::new(fencing_manager(db.config(), "parent"), name.clone())
        .expect("a fencing lock manager");
    let seen = election.leader().await.unwrap().expect("the child leads");
    assert_eq!(seen.holder_id.as_deref(), Some("child"));
    assert_eq!(
        seen.term,
        Some(child_term),
        "the observer reads the term too"
    );
    assert!(election.try_campaign().await.unwrap().is_none());
    let e2 = election.clone();
    let waiting = tokio::spawn(async move { e2.campaign(None).await });
    let observer = db.connect().await.unwrap();
    wait_for_waiters(&observer, lock_id_for_key(&election_key(&name)), 1).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let leading = waiting.await.unwrap().unwrap();
    assert!(leading.term() > child_term);
    let seen = election.leader().await.unwrap().expect("the parent leads");
    assert_eq!(seen.holder_id.as_deref(), Some("parent"));
    assert_eq!(seen.term, Some(leading.term()));
    leading.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resign_hands_over_and_watch_reports_the_vacancy() {
    let db = fenced_db().await;
    let observer = db.connect().await.unwrap();
    let a = Election::new(fencing_manager(db.config(), "a"), "handover")
        .expect("a fencing lock manager");
    let b = Election::new(fencing_manager(db.config(), "b"), "handover")
        .expect("a fencing lock manager");
    let watcher = Election::new(fencing_manager(db.config(), "watcher"), "handover")
        .expect("a fencing lock manager");
    let mut changes = Box::pin(watcher.watch(Duration::from_millis(20)));
    assert_eq!(changes.next().await.unwrap().unwrap(), None, "vacant");

    let first = a.campaign(Some(Duration::from_secs(10))).await.unwrap();
    let seen = changes.next().await.unwrap().unwrap().expect("a leads");
    assert_eq!(seen.holder_id.as_deref(), Some("a"));
    let waiting = tokio::spawn(async move { b.campaign(None).await });
    wait_for_waiters(&observer, lock_id_for_key(a.key()), 1).await;
    let t1 = first.term();
    first.resign().await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    assert!(second.term() > t1);
    // The watcher may or may not have looked during the hand-over.
    let seen = loop {
        let now = changes.next().await.unwrap().unwrap();
        if let Some(l) = now.filter(|l| l.holder_id.as_deref() == Some("b")) {
            break l;
        }
    };
    assert!(seen.pid.is_some());
    second.resign().await.unwrap();
    assert_eq!(changes.next().await.unwrap().unwrap(), None, "vacant again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_without_fencing_is_refused_and_left_free() {
    let db = TestDatabase::create().await.unwrap();
    let plain = PostgresLockManager::builder(db.config().into())
        .holder_id("plain")
        .build()
        .unwrap();
    // Refused when built, before any wait or connection.
    let err = Election::new(plain.clone(), "unfenced").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("fencing"), "{err}");
    assert_eq!(plain.held_lock_count(), 0, "nothing held");
    let observer = Election::new(fencing_manager(db.config(), "observer"), "unfenced")
        .expect("a fencing lock manager");
    assert_eq!(observer.leader().await.unwrap(), None, "nobody leads");
}

/// The backends with the manager's `application_name`.
async fn backends_of(client: &tokio_postgres::Client, holder: &str) -> Vec<i32> {
    client
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid",
            &[&format!("eventsource/{holder}")],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_and_watch_reuse_one_inspection_session() {
    let db = fenced_db().await;
    let admin = db.connect().await.unwrap();
    let watcher = Election::new(fencing_manager(db.config(), "inspector"), "reuse")
        .expect("a fencing lock manager");
    assert!(
        backends_of(&admin, "inspector").await.is_empty(),
        "none before a look"
    );
    assert_eq!(watcher.leader().await.unwrap(), None);
    let first = backends_of(&admin, "inspector").await;
    assert_eq!(first.len(), 1, "one inspection session: {first:?}");
    for _ in 0..5 {
        assert_eq!(watcher.leader().await.unwrap(), None);
        assert_eq!(
            backends_of(&admin, "inspector").await,
            first,
            "the same session"
        );
    }
    // Concurrent looks share it too, and so do the looks of watch().
    let looks = futures_util::future::join_all((0..8).map(|_| watcher.leader())).await;
    assert!(looks.into_iter().all(|l| l.unwrap().is_none()));
    let mut changes = Box::pin(watcher.watch(Duration::from_millis(5)));
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    let leading = Election::new(fencing_manager(db.config(), "leader"), "reuse")
        .expect("a fencing lock manager")
        .campaign(None)
        .await
        .unwrap();
    let seen = changes.next().await.unwrap().unwrap().expect("the leader");
    assert_eq!(seen.term, Some(leading.term()));
    assert_eq!(
        backends_of(&admin, "inspector").await,
        first,
        "the same session"
    );

    // Terminated, it is opened again at the next look.
    terminate(&admin, first[0]).await;
    let seen = watcher.leader().await.unwrap().expect("the leader");
    assert_eq!(seen.term, Some(leading.term()));
    pgcoord_testkit::locks::eventually_async("the terminated backend gone", || async {
        !backends_of(&admin, "inspector").await.contains(&first[0])
    })
    .await;
    let second = backends_of(&admin, "inspector").await;
    assert_eq!(second.len(), 1, "one new session: {second:?}");
    watcher.leader().await.unwrap();
    assert_eq!(backends_of(&admin, "inspector").await, second, "kept again");
    drop(changes);
    watcher.locks().close().await.unwrap();
    pgcoord_testkit::locks::eventually_async("closed with the manager", || async {
        backends_of(&admin, "inspector").await.is_empty()
    })
    .await;
    leading.resign().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_dropped_at_any_poll_leaves_at_most_the_one_inspection_session() {
    let db = fenced_db().await;
    let admin = db.connect().await.unwrap();
    let watcher = Election::new(fencing_manager(db.config(), "dropped-looks"), "drops")
        .expect("a fencing lock manager");
    let mut completed = false;
    for n in 0..32 {
        let out = pgcoord_testkit::locks::poll_n_then_drop(
            watcher.leader(),
            n,
            Duration::from_millis(50),
        )
        .await;
        // A connection dropped half-open ends on the server a moment later.
        pgcoord_testkit::locks::eventually_async("at most one session", || async {
            backends_of(&admin, "dropped-looks").await.len() <= 1
        })
        .await;
        if let Some(r) = out {
            assert_eq!(r.unwrap(), None);
            completed = true;
            break;
        }
    }
    assert!(completed, "leader() did not complete within 32 polls");
    assert_eq!(watcher.leader().await.unwrap(), None, "still works");
    pgcoord_testkit::locks::eventually_async("exactly the one session", || async {
        backends_of(&admin, "dropped-looks").await.len() == 1
    })
    .await;
}

/// `close()` while `run_while_leading` leads: the loop ends with the
/// manager, never leading again on it (a probe saw it campaign again in
/// the moment between `close` taking the leadership lock and the manager
/// counting as closed, then lead on a closed manager's open session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_while_leading_ends_the_loop_and_leaves_nothing_held() {
    let db = fenced_db().await;
    let client = db.connect().await.unwrap();
    for round in 0..8 {
        let m = fencing_manager(db.config(), &format!("closing-{round}"));
        let election = Election::new(m.clone(), "closing").unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let terms = Arc::new(AtomicUsize::new(0));
        let (led_tx, led_rx) = tokio::sync::oneshot::channel::<()>();
        let led_tx = Arc::new(Mutex::new(Some(led_tx)));
        let run = tokio::spawn({
            let (election, stop, terms) = (election.clone(), stop.clone(), terms.clone());
            async move {
                election
                    .run_while_leading(&stop, |term| {
                        terms.fetch_add(1, Ordering::SeqCst);
                        if let Some(tx) = led_tx.lock().unwrap().take() {
                            let _ = tx.send(());
                        }
                        let ends = term.token().clone();
                        async move { ends.cancelled().await }
                    })
                    .await
            }
        });
        led_rx.await.expect("the loop leads");
        m.close().await.unwrap();
        // A backstop against a hang, not a measure: the loop ends at once.
        let ended = tokio::time::timeout(Duration::from_secs(30), run).await;
        let outcome = ended
            .unwrap_or_else(|_| {
                panic!(
                    "round {round}: the loop still runs after close ({} terms)",
                    terms.load(Ordering::SeqCst)
                )
            })
            .unwrap();
        if let Err(e) = outcome {
            assert!(e.to_string().contains("closed"), "round {round}: {e}");
        }
        assert_eq!(terms.load(Ordering::SeqCst), 1, "round {round}: led again");
        assert_eq!(m.held_lock_count(), 0, "round {round}");
        pgcoord_testkit::locks::eventually_async("no advisory lock left", || async {
            crate::fault_support::advisory_locks(&client).await == 0
        })
        .await;
        stop.cancel();
    }
}

/// PostgreSQL keeps an `application_name` to printable ASCII (`ö` and a
/// tab became `?`): the holder id reaches `Election::leader` and
/// `holders()` as given all the same.
#[tokio::test]
async fn a_holder_id_outside_printable_ascii_comes_back_intact() {
    let db = fenced_db().await;
    let observer = fencing_manager(db.config(), "observer");
    for id in ["wörker-7", "tab\there", "50%", "日本-ﬁ"] {
        let locks = fencing_manager(db.config(), id);
        let election = Election::new(locks.clone(), "encoded").unwrap();
        let leading = election.campaign(None).await.unwrap();
        let seen = Election::new(observer.clone(), "encoded")
            .unwrap()
            .leader()
            .await
            .unwrap()
            .expect("a leader");
        assert_eq!(seen.holder_id.as_deref(), Some(id));
        let held = observer.holders(&[election.key()]).await.unwrap();
        let holder_ids: Vec<_> = held[0]
            .holders
            .iter()
            .map(|s| s.holder_id.as_deref())
            .collect();
        assert_eq!(holder_ids, [Some(id)]);
        leading.resign().await.unwrap();
        locks.close().await.unwrap();
    }
}
