//! Runners killed with SIGKILL mid-batch, in child processes of this test
//! binary: the next runner takes over at the committed checkpoint, and in
//! the end every event is applied exactly once, or (with dead letters)
//! parked exactly once and not applied.

use std::process::Stdio;
use std::time::Duration;

use pgcoord::readmodels::{DeadLetterPolicy, ProjectionRunner, ReadModelProjection, RetryPolicy};
use pgcoord::readmodels::{DeadLetterSelection, ReadModelRepository};
use pgcoord::{
    readmodels::postgres::{PostgresCheckpointWatch, PostgresEventTable},
    PostgresLockManager,
};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::support::*;

const EVENTS: i64 = 240;

/// A runner process: runs the projection until it is killed. Started by
/// the test below (`--ignored --exact`); ignored in a normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the runners_killed_* tests"]
async fn projection_worker() {
    let url = std::env::var("ES_PROJ_URL").expect("ES_PROJ_URL: run by the crash test");
    let worker = std::env::var("ES_PROJ_WORKER").unwrap();
    let db = pgcoord::readmodels::postgres::PostgresDatabase::connect(&url)
        .await
        .unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    let inner = Recorder {
        delay: Duration::from_millis(3),
        ..Recorder::default()
    };
    let locks = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("proj-worker-{worker}"))
        .build()
        .unwrap();
    let result = if std::env::var("ES_PROJ_POISON_EVERY").is_ok() {
        let every = std::env::var("ES_PROJ_POISON_EVERY")
            .unwrap()
            .parse()
            .unwrap();
        let handler = Picky {
            inner,
            poison_every: Some(every),
            ..Picky::default()
        };
        let projection = ReadModelProjection::new(handler, db.repository::<Seen>())
            .named("seen")
            .with_retry(RetryPolicy {
                max_attempts: 2,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(1),
                multiplier: 1.0,
            });
        let runner = ProjectionRunner::new(projection, feed)
            .batch_size(20)
            .with_dead_letters(DeadLetterPolicy::new().json_payload());
        runner.run(&locks, &CancellationToken::new()).await
    } else {
        let projection = ReadModelProjection::new(inner, db.repository::<Seen>()).named("seen");
        let runner = ProjectionRunner::new(projection, feed).batch_size(20);
        runner.run(&locks, &CancellationToken::new()).await
    };
    panic!("a worker runs until it is killed; its run ended with {result:?}");
}

fn spawn_worker(url: &str, worker: u32, poison_every: Option<i64>) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    if let Some(k) = poison_every {
        command.env("ES_PROJ_POISON_EVERY", k.to_string());
    }
    command
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
    killed_runners(None).await;
}

/// Every 7th event is poison: a batch of 20 fails and is replayed event by
/// event, parking two or three events, so the kills land among parkings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_killed_while_parking_leave_each_event_applied_or_parked_once() {
    killed_runners(Some(7)).await;
}

async fn killed_runners(poison_every: Option<i64>) {
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
                spawn_worker(&url, next, poison_every)
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
    let mut last = spawn_worker(&url, next + 1, poison_every);
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
    let Some(k) = poison_every else {
        assert_eq!(
            repo.count(&pgcoord::readmodels::Query::new())
                .await
                .unwrap(),
            EVENTS as u64
        );
        assert_each_applied_once(&repo, EVENTS).await;
        return;
    };
    let (poison, good): (Vec<i64>, Vec<i64>) = (1..=EVENTS).partition(|n| n % k == 0);
    assert_applied_once(&repo, &good).await;
    let projection = ReadModelProjection::new(Recorder::default(), repo);
    let runner = ProjectionRunner::new(projection.named("seen"), s.feed.clone());
    let parked = runner
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap();
    let at: Vec<i64> = parked.iter().map(|l| l.position).collect();
    assert_eq!(at, poison, "each poison event parked, and only those");
    assert!(parked.iter().all(|l| l.attempts == 2), "{parked:?}");
}
