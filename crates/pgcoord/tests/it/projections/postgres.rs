//! The runner on PostgreSQL: the event table as a feed (woken by LISTEN,
//! commits out of position order), lock loss, several projections on one
//! manager and pool, a role with only DML rights, read-your-writes from
//! another pool.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::EventFeed;
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::{
    readmodels::postgres::{
        projection_status, PostgresCheckpointWatch, PostgresDatabase, PostgresEventTable,
        PostgresReadModelRepository,
    },
    PostgresLockManager,
};
use pgcoord_testkit::pg::TestDatabase;
use tokio_util::sync::CancellationToken;

use super::support::*;

pub type PgRunner = ProjectionRunner<
    Recorder,
    PostgresReadModelRepository<Seen, PostgresDatabase>,
    PostgresEventTable<Ev>,
>;

pub struct Setup {
    pub test_db: TestDatabase,
    pub db: PostgresDatabase,
    pub feed: PostgresEventTable<Ev>,
    pub locks: PostgresLockManager,
}

/// A fresh database with the event table, the model's table and the
/// checkpoint tables.
pub async fn setup() -> Setup {
    setup_on(TestDatabase::create().await.unwrap()).await
}

/// [`setup`] on `test_db` (a private cluster's, for fault tests).
pub async fn setup_on(test_db: TestDatabase) -> Setup {
    let db = PostgresDatabase::connect(&test_db.url()).await.unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    feed.create_table().await.unwrap();
    db.create_schema::<Seen>().await.unwrap();
    let locks = PostgresLockManager::builder(test_db.config().into())
        .holder_id("runner-test")
        .build()
        .unwrap();
    Setup {
        test_db,
        db,
        feed,
        locks,
    }
}

pub fn runner(db: &PostgresDatabase, feed: &PostgresEventTable<Ev>, name: &str) -> Arc<PgRunner> {
    let projection =
        ReadModelProjection::new(Recorder::default(), db.repository::<Seen>()).named(name);
    // Only LISTEN wakes it: a missed notification would hang the test.
    Arc::new(
        ProjectionRunner::new(projection, feed.clone())
            .batch_size(4)
            .idle_interval(None),
    )
}

pub async fn append_committed(
    db: &PostgresDatabase,
    feed: &PostgresEventTable<Ev>,
    from: i64,
    to: i64,
) {
    let mut client = db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    for n in from..=to {
        assert_eq!(feed.append(&tx, &ev(n)).await.unwrap(), n);
    }
    tx.commit().await.unwrap();
}

fn spawn_run(r: &Arc<PgRunner>, locks: &PostgresLockManager, stop: &CancellationToken) -> RunTask {
    let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
    tokio::spawn(async move { r.run(&l, &s).await })
}

type RunTask = tokio::task::JoinHandle<pgcoord::Result<pgcoord::readmodels::RunSummary>>;

/// Waits (generously) for the runner's checkpoint to reach `position`;
/// fails at once if the runner stops instead.
pub async fn reach(r: &PgRunner, task: &mut RunTask, position: i64) {
    let progress = r.progress();
    tokio::select! {
        c = progress.wait_for(position, Some(Duration::from_secs(60))) => { c.unwrap(); }
        stopped = task => panic!("the runner stopped before {position}: {stopped:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_tails_the_event_table_woken_by_listen() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 10).await;
    let r = runner(&s.db, &s.feed, "seen");
    let stop = CancellationToken::new();
    let mut task = spawn_run(&r, &s.locks, &stop);
    reach(&r, &mut task, 10).await;
    append_committed(&s.db, &s.feed, 11, 13).await;
    reach(&r, &mut task, 13).await;
    stop.cancel();
    let summary = task.await.unwrap().unwrap();
    assert_eq!((summary.applied, summary.checkpoint), (13, Some(13)));
    assert_each_applied_once(&s.db.repository::<Seen>(), 13).await;
    assert_eq!(r.projection().checkpoint().await.unwrap(), Some(13));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_committed_before_an_earlier_one_waits_for_it() {
    let s = setup().await;
    let r = runner(&s.db, &s.feed, "seen");
    let stop = CancellationToken::new();
    let mut task = spawn_run(&r, &s.locks, &stop);

    // A takes position 1 and stays open; B takes position 2 and commits.
    let mut a_client = s.db.get().await.unwrap();
    let a = a_client.transaction().await.unwrap();
    assert_eq!(s.feed.append(&a, &ev(1)).await.unwrap(), 1);
    let mut b_client = s.db.get().await.unwrap();
    let b = b_client.transaction().await.unwrap();
    assert_eq!(s.feed.append(&b, &ev(2)).await.unwrap(), 2);
    b.commit().await.unwrap();

    // Position 2 is visible, but 1 may still come: the feed gives nothing.
    let head = s.feed.head().await.unwrap();
    assert_eq!(head, Some(2), "B's row is committed and visible");
    let other_reader = PostgresEventTable::<Ev>::new(s.db.clone(), "events")
        .unwrap()
        .listen();
    assert!(other_reader.read_after(None, 10).await.unwrap().is_empty());
    assert!(s.feed.read_after(None, 10).await.unwrap().is_empty());
    assert_eq!(r.projection().checkpoint().await.unwrap(), None);

    a.commit().await.unwrap();
    reach(&r, &mut task, 2).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(*r.projection().handler().order.lock().unwrap(), vec![1, 2]);
    assert_each_applied_once(&s.db.repository::<Seen>(), 2).await;
    let read = read_until(&other_reader, 2).await;
    assert_eq!(read.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_position_is_a_gap_not_a_stall() {
    let s = setup().await;
    let mut client = s.db.get().await.unwrap();
    let a = client.transaction().await.unwrap();
    assert_eq!(s.feed.append(&a, &ev(99)).await.unwrap(), 1);
    assert!(s.feed.read_after(None, 10).await.unwrap().is_empty());
    a.rollback().await.unwrap();
    let mut client = s.db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert_eq!(s.feed.append(&tx, &ev(2)).await.unwrap(), 2);
    tx.commit().await.unwrap();
    let read = read_until(&s.feed, 1).await;
    assert_eq!(read, vec![(2, ev(2))]);
}

/// Reads from the start until `n` events come, waiting on the feed's
/// signal between reads (transactions elsewhere on the server may hold the
/// watermark back for a while; the feed signals when it looks again).
async fn read_until(feed: &PostgresEventTable<Ev>, n: usize) -> Vec<(i64, Ev)> {
    let mut wake = feed.signal().expect("a listening feed").subscribe();
    let reading = async {
        loop {
            let read = feed.read_after(None, 10).await.unwrap();
            if read.len() >= n {
                return read;
            }
            wake.changed().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("the events never came")
}

/// The pid of the session holding `key`'s advisory lock.
async fn lock_holder_pid(client: &tokio_postgres::Client, key: &str) -> i32 {
    let id = pgcoord::lock_id_for_key(key);
    client
        .query_one(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_lock_session_is_terminated_stops_and_the_next_resumes() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 6).await;
    let r = runner(&s.db, &s.feed, "seen");
    let stop = CancellationToken::new();
    let mut task = spawn_run(&r, &s.locks, &stop);
    reach(&r, &mut task, 6).await;
    let admin = s.test_db.connect().await.unwrap();
    let pid = lock_holder_pid(&admin, "projection:seen").await;
    let ok: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(ok);
    let err = task.await.unwrap().unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    // Why, as the loss signal knows it, then what the runner did.
    assert_eq!(
        err.to_string(),
        "lock \"projection:seen\" was lost: the server ended the session holding the lock: \
         terminating connection due to administrator command (SQLSTATE 57P01); \
         the runner of projection \"seen\" stopped"
    );

    append_committed(&s.db, &s.feed, 7, 9).await;
    let next = runner(&s.db, &s.feed, "seen");
    let mut task = spawn_run(&next, &s.locks, &stop);
    reach(&next, &mut task, 9).await;
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().applied, 3);
    assert_each_applied_once(&s.db.repository::<Seen>(), 9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_projections_share_one_lock_manager_and_one_pool() {
    let s = setup().await;
    let small =
        PostgresDatabase::builder(pgcoord::ConnectOptions::parse(&s.test_db.url()).unwrap())
            .max_size(2)
            .build()
            .unwrap();
    let feed = PostgresEventTable::<Ev>::new(small.clone(), "events")
        .unwrap()
        .listen();
    append_committed(&small, &feed, 1, 8).await;
    let runners: Vec<_> = ["left", "right", "third"]
        .iter()
        .map(|n| runner(&small, &feed, n))
        .collect();
    let stop = CancellationToken::new();
    let mut tasks: Vec<_> = runners
        .iter()
        .map(|r| spawn_run(r, &s.locks, &stop))
        .collect();
    for (r, task) in runners.iter().zip(&mut tasks) {
        reach(r, task, 8).await;
    }
    append_committed(&small, &feed, 9, 9).await;
    for (r, task) in runners.iter().zip(&mut tasks) {
        reach(r, task, 9).await;
    }
    stop.cancel();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().applied, 9);
    }
    // Each projection applied each event once: the handler saw 1..=9 in order.
    for r in &runners {
        assert_eq!(
            *r.projection().handler().order.lock().unwrap(),
            (1..=9).collect::<Vec<_>>()
        );
    }
}

/// The grants docs/projections.md lists for a role that runs projections
/// on tables an owner created, and no more: DML on the checkpoint,
/// progress and model tables, SELECT on the event table and on its
/// sequence. Without the sequence the runner stops with an error that
/// names the grant; `projection_status` needs no sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_with_the_documented_grants_runs_the_runner_and_reads_its_status() {
    let s = setup().await;
    // The owner prepares everything once and writes the events.
    let owner_projection = ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>());
    owner_projection.prepare().await.unwrap();
    append_committed(&s.db, &s.feed, 1, 5).await;
    let admin = s.test_db.connect().await.unwrap();
    let role = format!("dml_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'dml-pw';
             REVOKE CREATE ON SCHEMA public FROM PUBLIC;
             GRANT USAGE ON SCHEMA public TO {role};
             GRANT SELECT, INSERT, UPDATE ON seen, eventsource_projection_checkpoints,
                 eventsource_projection_progress TO {role};
             GRANT SELECT ON events TO {role};"
        ))
        .await
        .unwrap();
    let mut config = s.test_db.config();
    config.user(&role).password("dml-pw");
    let db = PostgresDatabase::builder(config.clone().into())
        .max_size(4)
        .build()
        .unwrap();
    // The role really cannot create anything.
    let denied = db
        .get()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE nope (x int)")
        .await
        .unwrap_err();
    assert_eq!(
        denied.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
    let own = db.get().await.unwrap();
    let before = projection_status(&own, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!((before.checkpoint, before.lag_events), (None, Some(5)));

    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    feed.create_table().await.unwrap(); // exists: sends no DDL
    let r = runner(&db, &feed, "seen");
    let locks = PostgresLockManager::builder(config.into())
        .holder_id("dml-runner")
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let err = r.run(&locks, &stop).await.unwrap_err().to_string();
    assert!(
        err.contains("permission denied for sequence events_position_seq")
            && err.contains(r#"GRANT SELECT ON SEQUENCE "events_position_seq""#),
        "{err}"
    );
    assert_eq!(r.projection().checkpoint().await.unwrap(), None);

    admin
        .batch_execute(&format!(
            "GRANT SELECT ON SEQUENCE events_position_seq TO {role}"
        ))
        .await
        .unwrap();
    let r = runner(&db, &feed, "seen");
    let mut task = spawn_run(&r, &locks, &stop);
    reach(&r, &mut task, 5).await;
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().applied, 5);
    assert_each_applied_once(&db.repository::<Seen>(), 5).await;
    let after = projection_status(&own, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!((after.checkpoint, after.lag_events), (Some(5), Some(0)));
    drop((own, r, feed, db, locks));
    admin
        .batch_execute(&format!("DROP OWNED BY {role}"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_watch_on_another_pool_wakes_on_the_runners_commit() {
    let s = setup().await;
    let elsewhere = PostgresDatabase::connect(&s.test_db.url()).await.unwrap();
    let watch = PostgresCheckpointWatch::start(&elsewhere, "seen");
    let r = runner(&s.db, &s.feed, "seen");
    let stop = CancellationToken::new();
    let task = spawn_run(&r, &s.locks, &stop);
    append_committed(&s.db, &s.feed, 1, 3).await;
    assert!(
        watch
            .wait_for(3, Some(Duration::from_secs(60)))
            .await
            .unwrap()
            >= 3
    );
    // Read-your-writes: once the watch says so, the row is there.
    let repo = elsewhere.repository::<Seen>();
    use pgcoord::readmodels::ReadModelRepository;
    assert!(repo.get(id_of(3)).await.unwrap().is_some());
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_checkpoint_runs_no_ddl_and_prepare_runs_once() {
    let test_db = TestDatabase::create().await.unwrap();
    let db = PostgresDatabase::connect(&test_db.url()).await.unwrap();
    let projection = ReadModelProjection::new(Recorder::default(), db.repository::<Seen>());
    let admin = test_db.connect().await.unwrap();
    let exists = || async {
        admin
            .query_one(
                "SELECT to_regclass('eventsource_projection_checkpoints') IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    };
    assert_eq!(projection.checkpoint().await.unwrap(), None);
    assert!(!exists().await, "checkpoint() created the table");
    projection.prepare().await.unwrap();
    assert!(exists().await);
    // Once prepared, the projection value never asks again: dropping the
    // table behind its back shows it (the read says None, nothing re-creates it).
    admin
        .batch_execute("DROP TABLE eventsource_projection_checkpoints")
        .await
        .unwrap();
    projection.prepare().await.unwrap();
    assert_eq!(projection.checkpoint().await.unwrap(), None);
    assert!(!exists().await, "prepare ran twice");
}
