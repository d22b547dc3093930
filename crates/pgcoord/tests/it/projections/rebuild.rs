//! Rebuilding a projection without downtime on PostgreSQL: readers never
//! see a half-built table, no event is lost or doubled across the switch,
//! each version's runner holds its own lock, a killed rebuild resumes (or
//! starts over) without touching the live version, the old table goes on
//! request, and the handler knows when it warms up.
//!
//! The runners share one PostgreSQL lock manager (the live runner holds
//! `projection:seen`, the rebuild `projection:seen@v2`); see
//! `rebuild_crash` for rebuilds SIGKILLed in child processes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::postgres::PostgresEventTable;
use pgcoord::readmodels::{
    EventFeed, FeedSignal, Query, ReadModelRepository, TransactionalReadModels, VersionSwitch,
    VersionedReadModels,
};
use pgcoord::readmodels::{ProjectionRebuild, ReadModelProjection};
use pgcoord::DistributedLock;
use pgcoord::{
    readmodels::postgres::{projection_status, PostgresVersionSwitch, RebuildProgress},
    PostgresLockManager,
};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup, Setup};
use super::rebuild_support::*;
use super::support::*;

pub type LiveTask = tokio::task::JoinHandle<pgcoord::Result<pgcoord::readmodels::RunSummary>>;

pub fn spawn_live(
    locks: &PostgresLockManager,
    r: &Arc<LiveRunner>,
    stop: &CancellationToken,
) -> LiveTask {
    let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
    tokio::spawn(async move { r.run(&l, &s).await })
}

pub async fn reach_live(r: &LiveRunner, task: &mut LiveTask, position: i64) {
    let progress = r.progress();
    tokio::select! {
        c = progress.wait_for(position, Some(Duration::from_secs(60))) => { c.unwrap(); }
        stopped = task => panic!("the live runner stopped before {position}: {stopped:?}"),
    }
}

/// A lock manager of its own (another holder) on the test's database, to
/// look at the runners' locks from outside.
fn observer(s: &Setup) -> PostgresLockManager {
    PostgresLockManager::builder(s.test_db.config().into())
        .holder_id("rebuild-observer")
        .build()
        .unwrap()
}

/// The texts of the rows readers see, by position.
pub async fn texts(s: &Setup) -> Vec<(i64, String)> {
    let mut rows = s.db.repository::<Seen>().find(&Query::new()).await.unwrap();
    rows.sort_by_key(|r| r.position);
    rows.into_iter().map(|r| (r.position, r.text)).collect()
}

pub fn marked(marker: &str, from: i64, to: i64) -> Vec<(i64, String)> {
    (from..=to).map(|n| (n, format!("{marker} {n}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_never_see_a_half_built_table_and_no_event_is_lost_across_the_switch() {
    let s = setup().await;
    let locks = s.locks.clone();
    append_committed(&s.db, &s.feed, 1, 30).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&locks, &live, &stop);
    reach_live(&live, &mut live_task, 30).await;

    let reads = Arc::new(Reads::default());
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn(read_until(
        s.db.clone(),
        stop.clone(),
        reads.clone(),
        first_tx,
    ));
    first_rx.await.unwrap();
    let (db, feed) = (s.db.clone(), s.feed.clone());
    let appender = tokio::spawn(async move {
        for from in (31..=90).step_by(3) {
            append_committed(&db, &feed, from, from + 2).await;
            tokio::task::yield_now().await;
        }
    });

    let rebuild = rebuild_with(&s.db, &s.feed, Marked::new("rebuilt"));
    let summary = rebuild
        .run(&locks, &CancellationToken::new())
        .await
        .unwrap();
    assert!(summary.switched, "{summary:?}");
    assert_eq!(summary.version, 2);
    let switched_at = summary.checkpoint.expect("a checkpoint");
    assert!(switched_at >= 30, "{summary:?}");

    appender.await.unwrap();
    reach_live(&live, &mut live_task, 90).await;
    stop.cancel();
    reader.await.unwrap(); // a read that saw a half-built table panicked there
    live_task.await.unwrap().unwrap();
    assert!(
        reads.rebuilt.load(Ordering::Relaxed) >= 1,
        "no read after the switch"
    );
    assert!(reads.total.load(Ordering::Relaxed) > reads.rebuilt.load(Ordering::Relaxed));

    // Every event once: the rebuilt version up to the switch, the live
    // runner after it, on the new table.
    assert_each_applied_once(&s.db.repository::<Seen>(), 90).await;
    let mut expected = marked("rebuilt", 1, switched_at);
    expected.extend(marked("live", switched_at + 1, 90));
    assert_eq!(texts(&s).await, expected);
    let rebuilt = rebuild.projection().handler();
    assert_eq!(rebuilt.seen(), (1..=switched_at).collect::<Vec<_>>());
    assert!(
        rebuilt.all_warming_up(true),
        "the rebuild's handler warmed up"
    );
    assert!(
        live.projection().handler().all_warming_up(false),
        "the live one did not"
    );
    assert_eq!(checkpoint_row(&s.db, "seen").await, Some(90));
    assert_eq!(checkpoint_row(&s.db, "seen@v2").await, None);

    // The old version is kept until dropped on request.
    let versions = rebuild.versions().await.unwrap();
    assert_eq!((versions.current, versions.building), (2, None));
    assert_eq!(versions.retired, [1]);
    assert!(exists(&s.db, "seen_v1").await);
    assert_eq!(rebuild.drop_retired().await.unwrap(), [1]);
    assert!(!exists(&s.db, "seen_v1").await);
    assert!(rebuild.versions().await.unwrap().retired.is_empty());
    assert_eq!(texts(&s).await.len(), 90);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_version_holds_its_own_lock_and_a_killed_rebuild_resumes_without_touching_the_live_one(
) {
    let s = setup().await;
    let locks = s.locks.clone();
    append_committed(&s.db, &s.feed, 1, 12).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&locks, &live, &stop);
    reach_live(&live, &mut live_task, 12).await;

    let (handler, stalled) = Marked::stalling_at("rebuilt", 7);
    let rebuild = rebuild_with(&s.db, &s.feed, handler);
    let task = {
        let (r, l) = (rebuild.clone(), locks.clone());
        tokio::spawn(async move { r.run(&l, &CancellationToken::new()).await })
    };
    stalled.await.unwrap();
    let other = observer(&s);
    assert!(
        other.try_lock("projection:seen").await.unwrap().is_none(),
        "the live runner's"
    );
    assert!(
        other
            .try_lock("projection:seen@v2")
            .await
            .unwrap()
            .is_none(),
        "the rebuild's"
    );

    task.abort(); // killed midway: the future is dropped
    assert!(task.await.unwrap_err().is_cancelled());
    let freed = other
        .acquire("projection:seen@v2", Some(Duration::from_secs(60)))
        .await
        .expect("the killed rebuild's lock is given back");
    freed.release().await.unwrap();

    // The live version is as the live runner left it; the new one is kept.
    assert_eq!(texts(&s).await, marked("live", 1, 12));
    assert_eq!(checkpoint_row(&s.db, "seen").await, Some(12));
    assert_eq!(
        checkpoint_row(&s.db, "seen@v2").await,
        Some(4),
        "batches of 4; 5..8 rolled back"
    );
    let versions = rebuild.versions().await.unwrap();
    assert_eq!((versions.current, versions.building), (1, Some(2)));
    let admin = s.test_db.connect().await.unwrap();
    let status = projection_status(&admin, "seen", None).await.unwrap();
    assert_eq!(
        status.rebuild,
        Some(RebuildProgress {
            version: 2,
            checkpoint: Some(4)
        }),
        "what `projection status` shows"
    );

    append_committed(&s.db, &s.feed, 13, 15).await;
    let again = rebuild_with(&s.db, &s.feed, Marked::new("rebuilt"));
    let summary = again.run(&locks, &CancellationToken::new()).await.unwrap();
    assert!(summary.switched);
    assert_eq!(summary.version, 2);
    let switched_at = summary.checkpoint.unwrap();
    assert_eq!(
        again.projection().handler().seen(),
        (5..=switched_at).collect::<Vec<_>>(),
        "resumed at the version's checkpoint"
    );
    reach_live(&live, &mut live_task, 15).await;
    stop.cancel();
    live_task.await.unwrap().unwrap();
    assert_each_applied_once(&s.db.repository::<Seen>(), 15).await;
    let status = projection_status(&admin, "seen", None).await.unwrap();
    assert_eq!(status.rebuild, None, "switched");
    let mut expected = marked("rebuilt", 1, switched_at);
    expected.extend(marked("live", switched_at + 1, 15));
    assert_eq!(texts(&s).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_rebuild_does_not_switch_and_an_abandoned_one_starts_over() {
    let s = setup().await;
    let locks = s.locks.clone();
    append_committed(&s.db, &s.feed, 1, 10).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&locks, &live, &stop);
    reach_live(&live, &mut live_task, 10).await;

    let stopped = CancellationToken::new();
    stopped.cancel();
    let first = rebuild_with(&s.db, &s.feed, Marked::new("rebuilt"));
    let summary = first.run(&locks, &stopped).await.unwrap();
    assert!(!summary.switched, "{summary:?}");
    assert_eq!(first.versions().await.unwrap().building, Some(2));

    let (handler, stalled) = Marked::stalling_at("rebuilt", 6);
    let killed = rebuild_with(&s.db, &s.feed, handler);
    let task = {
        let (r, l) = (killed.clone(), locks.clone());
        tokio::spawn(async move { r.run(&l, &CancellationToken::new()).await })
    };
    stalled.await.unwrap();
    task.abort();
    let _ = task.await;
    assert_eq!(checkpoint_row(&s.db, "seen@v2").await, Some(4));

    assert_eq!(first.abandon(&locks).await.unwrap(), Some(2));
    assert!(!exists(&s.db, "seen_v2").await);
    assert_eq!(checkpoint_row(&s.db, "seen@v2").await, None);
    assert_eq!(first.versions().await.unwrap().building, None);
    assert_eq!(
        first.abandon(&locks).await.unwrap(),
        None,
        "nothing left to abandon"
    );
    assert_eq!(
        texts(&s).await,
        marked("live", 1, 10),
        "the live version untouched"
    );

    let over = rebuild_with(&s.db, &s.feed, Marked::new("rebuilt"));
    let summary = over.run(&locks, &CancellationToken::new()).await.unwrap();
    assert!(summary.switched);
    assert_eq!(
        over.projection().handler().seen(),
        (1..=10).collect::<Vec<_>>(),
        "from 0"
    );
    assert_eq!(texts(&s).await, marked("rebuilt", 1, 10));
    stop.cancel();
    live_task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_switch_rolls_back_and_the_live_runner_goes_on() {
    let s = setup().await;
    let locks = s.locks.clone();
    append_committed(&s.db, &s.feed, 1, 4).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&locks, &live, &stop);
    reach_live(&live, &mut live_task, 4).await;

    let repo = s.db.repository::<Seen>();
    repo.prepare_checkpoints().await.unwrap();
    assert_eq!(repo.start_version("seen").await.unwrap(), 2);
    assert_eq!(
        repo.start_version("seen").await.unwrap(),
        2,
        "resumed, not a new one"
    );
    let err = repo.begin_switch("seen", 3).await.unwrap_err();
    assert!(err.to_string().contains("not building version 3"), "{err}");

    let switch: PostgresVersionSwitch = repo.begin_switch("seen", 2).await.unwrap();
    assert_eq!(switch.live_checkpoint(), Some(4));
    append_committed(&s.db, &s.feed, 5, 8).await;
    drop(switch); // the live runner's next batch waited on it
    reach_live(&live, &mut live_task, 8).await;
    stop.cancel();
    live_task.await.unwrap().unwrap();

    assert_eq!(texts(&s).await, marked("live", 1, 8));
    assert!(exists(&s.db, "seen_v2").await);
    let versions = repo.versions("seen").await.unwrap();
    assert_eq!((versions.current, versions.building), (1, Some(2)));
}

/// A feed that says when a read came back empty.
struct Observed {
    inner: PostgresEventTable<Ev>,
    empty: tokio::sync::mpsc::UnboundedSender<Option<i64>>,
}

impl EventFeed for Observed {
    type Event = Ev;

    async fn read_after(
        &self,
        after: Option<i64>,
        limit: usize,
    ) -> pgcoord::Result<Vec<(i64, Ev)>> {
        let batch = self.inner.read_after(after, limit).await?;
        if batch.is_empty() {
            let _ = self.empty.send(after);
        }
        Ok(batch)
    }

    fn signal(&self) -> Option<FeedSignal> {
        self.inner.signal()
    }

    async fn head(&self) -> pgcoord::Result<Option<i64>> {
        self.inner.head().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_on_a_feed_of_its_own_waits_for_the_events_it_holds_back() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 10).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&s.locks, &live, &stop);
    reach_live(&live, &mut live_task, 10).await;

    // A transaction with an id, still open: a feed that has not looked
    // before cannot tell yet that nothing below its positions is coming.
    let mut blocker = s.test_db.connect().await.unwrap();
    let open = blocker.transaction().await.unwrap();
    open.execute("SELECT pg_current_xact_id()", &[])
        .await
        .unwrap();
    let (empty, mut empties) = tokio::sync::mpsc::unbounded_channel();
    let fresh = PostgresEventTable::<Ev>::new(s.db.clone(), "events")
        .unwrap()
        .listen();
    let feed = Observed {
        inner: fresh,
        empty,
    };
    let projection =
        ReadModelProjection::new(Marked::new("rebuilt"), s.db.repository::<Seen>()).named("seen");
    let rebuild = Arc::new(ProjectionRebuild::new(projection, feed).batch_size(4));
    let task = {
        let (r, l) = (rebuild.clone(), s.locks.clone());
        tokio::spawn(async move { r.run(&l, &CancellationToken::new()).await })
    };
    assert_eq!(empties.recv().await, Some(None), "held back from the start");
    assert_eq!(checkpoint_row(&s.db, "seen").await, Some(10));
    open.commit().await.unwrap();

    let summary = task
        .await
        .unwrap()
        .expect("not an error: the feed ends past 0");
    assert!(summary.switched, "{summary:?}");
    assert_eq!(summary.checkpoint, Some(10));
    assert_eq!(texts(&s).await, marked("rebuilt", 1, 10));
    stop.cancel();
    live_task.await.unwrap().unwrap();
}
