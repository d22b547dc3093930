//! Segmented runners SIGKILLed mid-batch, in child processes of this test
//! binary: the others take the dead runner's segments, and in the end
//! every event is applied exactly once, each partition in order.

use std::process::Stdio;
use std::time::Duration;

use pgcoord::readmodels::{ReadModelProjection, Segment};
use pgcoord::{
    readmodels::postgres::{PostgresCheckpointWatch, PostgresEventTable},
    PostgresLockManager,
};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::segments::{assert_partition_order, key, segmented, wait_all_applied, NAME};
use super::support::*;

const EVENTS: i64 = 400;
const SEGMENTS: u32 = 4;
/// How long a runner spends on one event: long enough that a segment's
/// last 50 events outlast the test's own wake-up on a loaded machine (at
/// 10 ms a kill meant for mid-segment came after the segment was done).
const EVENT_TIME: Duration = Duration::from_millis(25);

/// A segmented runner process: runs until it is killed. Started by the
/// test below (`--ignored --exact`); ignored in a normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of segmented_runners_killed_mid_batch_*"]
async fn segmented_worker() {
    let url = std::env::var("ES_SEG_URL").expect("ES_SEG_URL: run by the crash test");
    let worker = std::env::var("ES_SEG_WORKER").unwrap();
    let db = pgcoord::readmodels::postgres::PostgresDatabase::connect(&url)
        .await
        .unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    let locks = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("seg-worker-{worker}"))
        .build()
        .unwrap();
    let runner =
        segmented(&db, &feed, SEGMENTS, 10, EVENT_TIME).recheck(Duration::from_millis(100));
    let result = runner.run(&locks, &CancellationToken::new()).await;
    panic!("a worker runs until it is killed; its run ended with {result:?}");
}

fn spawn_worker(url: &str, worker: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(crate::common::worker_args(
            module_path!(),
            "segmented_worker",
        ))
        .arg("--nocapture")
        .env("ES_SEG_URL", url)
        .env("ES_SEG_WORKER", worker.to_string())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The position of segment `i`'s `k`-th event (from 1) among 1..=EVENTS.
fn kth_of_segment(i: u32, k: usize) -> i64 {
    let segment = Segment::new(i, SEGMENTS).unwrap();
    (1..=EVENTS)
        .filter(|n| segment.holds(&key(&ev(*n))))
        .nth(k - 1)
        .expect("the segment has that many events")
}

async fn kill(child: &mut Child) {
    child.start_kill().unwrap();
    let status = child.wait().await.unwrap();
    assert!(!status.success(), "a worker exited by itself: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segmented_runners_killed_mid_batch_leave_every_event_applied_once() {
    let s = setup().await;
    ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>())
        .prepare()
        .await
        .unwrap();
    append_committed(&s.db, &s.feed, 1, EVENTS).await;
    let url = s.test_db.url();
    let watch = |i: u32| {
        let name = Segment::new(i, SEGMENTS).unwrap().projection_name(NAME);
        PostgresCheckpointWatch::start(&s.db, &name)
    };
    let (w0, w1) = (watch(0), watch(1));
    let mut workers: Vec<Child> = (1..=3).map(|w| spawn_worker(&url, w)).collect();
    // Three runners share four segments (EVENT_TIME per event, 10 per batch);
    // one is SIGKILLed at each milestone, inside a batch.
    let first = kth_of_segment(0, 20);
    w0.wait_for(first, Some(Duration::from_secs(120)))
        .await
        .unwrap();
    kill(&mut workers[0]).await;
    let second = kth_of_segment(1, 50);
    w1.wait_for(second, Some(Duration::from_secs(120)))
        .await
        .unwrap();
    kill(&mut workers[1]).await;
    // The last one (and a newcomer) finish the job.
    workers.push(spawn_worker(&url, 4));
    wait_all_applied(&s.db, SEGMENTS, EVENTS).await;
    for w in &mut workers[2..] {
        kill(w).await;
    }
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, EVENTS).await;
    assert_partition_order(&repo).await;
}
