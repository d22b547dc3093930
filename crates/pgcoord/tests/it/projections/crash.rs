//! Runners killed with SIGKILL mid-batch, in child processes of this test
//! binary: the next runner takes over at the committed checkpoint, and in
//! the end every event is applied exactly once.

use std::process::Stdio;
use std::time::Duration;

use pgcoord::adapters::postgres::{
    PostgresCheckpointWatch, PostgresEventTable, PostgresLockManager,
};
use pgcoord::adapters::sql::{ProjectionRunner, ReadModelProjection};
use pgcoord::ports::readmodels::ReadModelRepository;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::support::*;

const EVENTS: i64 = 240;

/// A runner process: runs the projection until it is killed. Started by
/// the test below (`--ignored --exact`); ignored in a normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of runners_killed_mid_batch_leave_every_event_applied_once"]
async fn projection_worker() {
    let url = std::env::var("ES_PROJ_URL").expect("ES_PROJ_URL: run by the crash test");
    let worker = std::env::var("ES_PROJ_WORKER").unwrap();
    let db = pgcoord::adapters::postgres::PostgresDatabase::connect(&url)
        .await
        .unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    let handler = Recorder {
        delay: Duration::from_millis(3),
        ..Recorder::default()
    };
    let projection = ReadModelProjection::new(handler, db.repository::<Seen>()).named("seen");
    let runner = ProjectionRunner::new(projection, feed).batch_size(20);
    let locks = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("proj-worker-{worker}"))
        .build();
    let result = runner.run(&locks, &CancellationToken::new()).await;
    panic!("a worker runs until it is killed; its run ended with {result:?}");
}

fn spawn_worker(url: &str, worker: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(crate::common::worker_args(
            module_path!(),
            "projection_worker",
        ))
        .arg("--nocapture")
        .env("ES_PROJ_URL", url)
        .env("ES_PROJ_WORKER", worker.to_string())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_killed_mid_batch_leave_every_event_applied_once() {
    let s = setup().await;
    ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>())
        .prepare()
        .await
        .unwrap();
    append_committed(&s.db, &s.feed, 1, EVENTS).await;
    let watch = PostgresCheckpointWatch::start(&s.db, "seen");
    let url = s.test_db.url();
    let mut next = 0;
    let mut killed_at = Vec::new();
    // Two runners at a time (one applies, one waits for the lock); both
    // SIGKILLed at each milestone, while the active one is inside a batch
    // (3 ms per event, 20 per batch).
    for milestone in [40, 100, 160] {
        let mut pair: Vec<Child> = (0..2)
            .map(|_| {
                next += 1;
                spawn_worker(&url, next)
            })
            .collect();
        watch
            .wait_for(milestone, Some(Duration::from_secs(120)))
            .await
            .unwrap();
        for child in &mut pair {
            child.start_kill().unwrap();
        }
        for child in &mut pair {
            let status = child.wait().await.unwrap();
            assert!(!status.success(), "a worker exited by itself: {status}");
        }
        killed_at.push(watch.checkpoint().unwrap());
    }
    // A last runner finishes the job.
    let mut last = spawn_worker(&url, next + 1);
    watch
        .wait_for(EVENTS, Some(Duration::from_secs(120)))
        .await
        .unwrap();
    last.start_kill().unwrap();
    last.wait().await.unwrap();

    assert!(
        killed_at.iter().all(|&c| c < EVENTS),
        "every kill came before the end: {killed_at:?}"
    );
    let repo = s.db.repository::<Seen>();
    assert_eq!(
        repo.count(&pgcoord::Query::new()).await.unwrap(),
        EVENTS as u64
    );
    assert_each_applied_once(&repo, EVENTS).await;
}
