//! Rebuilds SIGKILLed in child processes of this test binary, while the
//! live runner (this process) tails the feed and a reader checks every
//! read: a rebuild killed mid-batch keeps its committed batches and gives
//! its lock back, a switch killed while open rolls back and the live
//! runner goes on, and a rebuild started again resumes at its version's
//! checkpoint and switches once, with every event applied once.

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::{VersionSwitch, VersionedReadModels};
use pgcoord::DistributedLock;
use pgcoord::{
    readmodels::postgres::{PostgresCheckpointWatch, PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::rebuild::{marked, reach_live, spawn_live, texts};
use super::rebuild_support::*;
use super::support::*;

const BOUND: Duration = Duration::from_secs(120);

async fn worker_db() -> (String, PostgresDatabase) {
    let url = std::env::var("ES_RB_URL").expect("ES_RB_URL: run by the rebuild crash test");
    let db = PostgresDatabase::connect(&url).await.unwrap();
    (url, db)
}

/// A rebuild process: rebuilds `seen` (`ES_RB_DELAY_MS` per event), says
/// where its handler started and where it switched, and exits. Started by
/// the test below (`--ignored --exact`); ignored in a normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of a_rebuild_killed_in_a_child_process_*"]
async fn rebuild_worker() {
    let (url, db) = worker_db().await;
    let delay: u64 = std::env::var("ES_RB_DELAY_MS").unwrap().parse().unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events").unwrap();
    let locks = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("rebuild-worker-{}", std::process::id()))
        .build()
        .unwrap();
    let handler = Marked::slow("rebuilt", Duration::from_millis(delay));
    let rebuild = rebuild_with(&db, &feed, handler);
    let summary = rebuild
        .run(&locks, &CancellationToken::new())
        .await
        .unwrap();
    assert!(summary.switched, "{summary:?}");
    let seen = rebuild.projection().handler().seen();
    println!(
        "{MARK}REBUILD-SWITCHED first={} checkpoint={}",
        seen.first().copied().unwrap_or(0),
        summary.checkpoint.unwrap_or(0)
    );
}

/// A process that opens the switch to version 2, says so, and waits to
/// be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of a_rebuild_killed_in_a_child_process_*"]
async fn switch_worker() {
    let (_, db) = worker_db().await;
    let switch = db
        .repository::<Seen>()
        .begin_switch("seen", 2)
        .await
        .unwrap();
    println!("{MARK}SWITCH-OPEN live={:?}", switch.live_checkpoint());
    std::future::pending::<()>().await;
}

/// A child process; its output is read all along (a full pipe would
/// stall it) and its marked lines kept.
struct Worker {
    child: Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// What a worker's lines say start with this (libtest may print the
/// test's name before it on the same line).
const MARK: &str = "WORKER-SAYS ";

impl Worker {
    fn spawn(url: &str, name: &str, delay_ms: u64) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(crate::common::worker_args(module_path!(), name))
            .arg("--nocapture")
            .env("ES_RB_URL", url)
            .env("ES_RB_DELAY_MS", delay_ms.to_string())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                if let Some((_, said)) = line.split_once(MARK) {
                    let _ = tx.send(said.to_owned());
                }
            }
        });
        Self { child, lines }
    }

    /// The first thing it says starting with `prefix`, without it.
    async fn line(&mut self, prefix: &str) -> String {
        let read = async {
            while let Some(line) = self.lines.recv().await {
                if let Some(rest) = line.strip_prefix(prefix) {
                    return rest.to_owned();
                }
            }
            panic!("the worker ended without saying {prefix:?}");
        };
        tokio::time::timeout(BOUND, read).await.expect("in time")
    }

    async fn sigkill(mut self) {
        self.child.start_kill().unwrap(); // SIGKILL
        let status = self.child.wait().await.unwrap();
        assert!(!status.success(), "the worker exited by itself: {status}");
    }
}

/// `key=value` out of a worker's line.
fn field(line: &str, key: &str) -> i64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

async fn count(s: &super::postgres::Setup, table: &str) -> i64 {
    let client = s.db.get().await.unwrap();
    let sql = format!("SELECT count(*) FROM {table}");
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_killed_in_a_child_process_resumes_and_switches_once() {
    let s = setup().await;
    let url = s.test_db.url();
    append_committed(&s.db, &s.feed, 1, 40).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&s.locks, &live, &stop);
    reach_live(&live, &mut live_task, 40).await;
    let reads = Arc::new(Reads::default());
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn(read_until(
        s.db.clone(),
        stop.clone(),
        reads.clone(),
        first_tx,
    ));
    first_rx.await.unwrap();

    // 1. A slow rebuild (20 ms per event, batches of 4) SIGKILLed halfway.
    let watch = PostgresCheckpointWatch::start(&s.db, "seen@v2");
    let killed = Worker::spawn(&url, "rebuild_worker", 20);
    watch.wait_for(20, Some(BOUND)).await.unwrap();
    killed.sigkill().await;
    let resumed_at = checkpoint_row(&s.db, "seen@v2").await.expect("committed");
    assert!(
        (20..40).contains(&resumed_at),
        "killed midway: {resumed_at}"
    );
    assert_eq!(
        count(&s, "seen_v2").await,
        resumed_at,
        "the batch in progress rolled back with the process"
    );
    let observer = PostgresLockManager::builder(s.test_db.config().into())
        .holder_id("rebuild-observer")
        .build()
        .unwrap();
    let freed = observer
        .acquire("projection:seen@v2", Some(BOUND))
        .await
        .expect("the server gave the killed rebuild's lock back");
    freed.release().await.unwrap();

    // 2. A switch opened in another process, which is SIGKILLed with it
    //    open: the server rolls it back and the live runner goes on.
    append_committed(&s.db, &s.feed, 41, 60).await;
    reach_live(&live, &mut live_task, 60).await;
    let mut switcher = Worker::spawn(&url, "switch_worker", 0);
    assert_eq!(switcher.line("SWITCH-OPEN ").await, "live=Some(60)");
    append_committed(&s.db, &s.feed, 61, 64).await;
    switcher.sigkill().await;
    reach_live(&live, &mut live_task, 64).await;
    let versions = s.db.repository::<Seen>().versions("seen").await.unwrap();
    assert_eq!((versions.current, versions.building), (1, Some(2)));
    assert_eq!(
        texts(&s).await,
        marked("live", 1, 64),
        "the live version untouched"
    );

    // 3. Started again, while events keep coming (each chunk once the live
    //    runner has the previous one), it resumes and switches.
    let (db, feed, progress) = (s.db.clone(), s.feed.clone(), live.progress());
    let appender = tokio::spawn(async move {
        for from in (65..=120).step_by(4) {
            append_committed(&db, &feed, from, from + 3).await;
            progress.wait_for(from + 3, Some(BOUND)).await.unwrap();
        }
    });
    let mut again = Worker::spawn(&url, "rebuild_worker", 1);
    let done = again.line("REBUILD-SWITCHED ").await;
    let status = tokio::time::timeout(BOUND, again.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "the second rebuild failed: {status}");
    assert_eq!(
        field(&done, "first"),
        resumed_at + 1,
        "resumed at the version's checkpoint"
    );
    let switched_at = field(&done, "checkpoint");
    assert!(switched_at >= 64, "{done}");
    appender.await.unwrap();
    reach_live(&live, &mut live_task, 120).await;
    stop.cancel();
    reader.await.unwrap(); // a read that saw a half-built table panicked there
    live_task.await.unwrap().unwrap();
    assert!(
        reads.rebuilt.load(Ordering::Relaxed) >= 1,
        "no read after the switch"
    );

    assert_each_applied_once(&s.db.repository::<Seen>(), 120).await;
    let mut expected = marked("rebuilt", 1, switched_at);
    expected.extend(marked("live", switched_at + 1, 120));
    assert_eq!(texts(&s).await, expected);
    assert_eq!(checkpoint_row(&s.db, "seen").await, Some(120));
    assert_eq!(checkpoint_row(&s.db, "seen@v2").await, None);
    let versions = s.db.repository::<Seen>().versions("seen").await.unwrap();
    assert_eq!((versions.current, versions.building), (2, None));
    assert_eq!(versions.retired, [1]);
}
