//! Segmented projections on PostgreSQL: several runners share the
//! segments, each segment held by exactly one; a newcomer gets its share;
//! every event applied once, each partition in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::{
    ProjectionRunner, ReadModelProjection, Segment, SegmentedRunner, SegmentedSummary,
};
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord::{
    readmodels::postgres::{
        PostgresCheckpointWatch, PostgresDatabase, PostgresEventTable, PostgresReadModelRepository,
    },
    PostgresLockManager,
};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::support::*;

pub const NAME: &str = "seen";

pub type PgSegmented = SegmentedRunner<
    Recorder,
    PostgresReadModelRepository<Seen, PostgresDatabase>,
    PostgresEventTable<Ev>,
>;

/// The partition key of the tests: seven aggregates.
pub fn key(e: &Ev) -> String {
    format!("agg-{}", e.n % 7)
}

/// A runner of `count` segments (batches of `batch`, `delay` per event).
pub fn segmented(
    db: &PostgresDatabase,
    feed: &PostgresEventTable<Ev>,
    count: u32,
    batch: usize,
    delay: Duration,
) -> PgSegmented {
    SegmentedRunner::new(NAME, count, |segment| {
        let handler = Recorder {
            delay,
            ..Recorder::default()
        };
        let projection = ReadModelProjection::new(handler, db.repository::<Seen>())
            .named(segment.projection_name(NAME));
        ProjectionRunner::new(projection, segment.feed(feed.clone(), key)).batch_size(batch)
    })
    .unwrap()
    .recheck(Duration::from_millis(50))
}

/// Waits until every segment's checkpoint is at its last event of 1..=n.
pub async fn wait_all_applied(db: &PostgresDatabase, count: u32, n: i64) {
    for i in 0..count {
        let segment = Segment::new(i, count).unwrap();
        let last = (1..=n).rev().find(|m| segment.holds(&key(&ev(*m))));
        if let Some(last) = last {
            let watch = PostgresCheckpointWatch::start(db, &segment.projection_name(NAME));
            watch
                .wait_for(last, Some(Duration::from_secs(120)))
                .await
                .unwrap();
        }
    }
}

/// Each partition's events were applied in position order (a row's
/// `created_at` is when its event was applied).
pub async fn assert_partition_order<R: ReadModelRepository<Seen>>(repo: &R) {
    let mut rows = repo.find(&Query::new()).await.unwrap();
    rows.sort_by_key(|r| r.position);
    let mut last: HashMap<String, (i64, chrono::DateTime<chrono::Utc>)> = HashMap::new();
    for row in rows {
        let k = key(&ev(row.position));
        if let Some((before, at)) = last.get(&k) {
            assert!(
                *at <= row.meta.created_at,
                "{k}: event {} applied before event {before}",
                row.position
            );
        }
        last.insert(k, (row.position, row.meta.created_at));
    }
}

/// Segment index -> holder ids, from `pg_locks`.
pub(super) async fn holders(locks: &PostgresLockManager, count: u32) -> Vec<Vec<String>> {
    let keys: Vec<String> = (0..count)
        .map(|i| {
            format!(
                "projection:{}",
                Segment::new(i, count).unwrap().projection_name(NAME)
            )
        })
        .collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let found = locks.holders(&refs).await.unwrap();
    keys.iter()
        .map(|k| {
            found
                .iter()
                .filter(|l| l.key.as_deref() == Some(k.as_str()))
                .flat_map(|l| l.holders.iter().filter_map(|h| h.holder_id.clone()))
                .collect()
        })
        .collect()
}

/// Waits until every segment has exactly one holder and each of `runners`
/// holds `share` (a look every 20 ms, for at most a minute); returns the
/// last look either way, for the caller to assert on.
pub(super) async fn wait_balanced(
    locks: &PostgresLockManager,
    count: u32,
    runners: &[&str],
    share: impl Fn(usize) -> bool,
) -> Vec<Vec<String>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let look = holders(locks, count).await;
        let one_each = look.iter().all(|h| h.len() == 1);
        let fair = runners
            .iter()
            .all(|r| share(look.iter().filter(|h| h.iter().any(|x| x == r)).count()));
        if (one_each && fair) || tokio::time::Instant::now() > deadline {
            return look;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) fn manager(s: &super::postgres::Setup, id: &str) -> PostgresLockManager {
    PostgresLockManager::builder(s.test_db.config().into())
        .holder_id(id)
        .build()
        .unwrap()
}

pub(super) type Task = tokio::task::JoinHandle<pgcoord::Result<SegmentedSummary>>;

pub(super) fn spawn(
    r: &Arc<PgSegmented>,
    locks: &PostgresLockManager,
    stop: &CancellationToken,
) -> Task {
    let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
    tokio::spawn(async move { r.run(&l, &s).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_takes_half_of_the_segments_and_every_event_applies_once() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 60).await;
    let (a_locks, b_locks) = (manager(&s, "seg-a"), manager(&s, "seg-b"));
    let stop = CancellationToken::new();
    let a = Arc::new(segmented(&s.db, &s.feed, 4, 5, Duration::from_millis(2)));
    let a_task = spawn(&a, &a_locks, &stop);
    let look = wait_balanced(&s.locks, 4, &["seg-a"], |n| n == 4).await;
    assert!(
        look.iter().all(|h| h == &["seg-a"]),
        "alone, A runs all: {look:?}"
    );

    let b = Arc::new(segmented(&s.db, &s.feed, 4, 5, Duration::from_millis(2)));
    let b_task = spawn(&b, &b_locks, &stop);
    let look = wait_balanced(&s.locks, 4, &["seg-a", "seg-b"], |n| n == 2).await;
    assert!(
        look.iter().all(|h| h.len() == 1),
        "one holder each: {look:?}"
    );
    for r in ["seg-a", "seg-b"] {
        let held = look.iter().filter(|h| h[0] == r).count();
        assert_eq!(held, 2, "{r} holds half: {look:?}");
    }
    append_committed(&s.db, &s.feed, 61, 200).await;
    wait_all_applied(&s.db, 4, 200).await;
    stop.cancel();
    let a_done = a_task.await.unwrap().unwrap();
    let b_done = b_task.await.unwrap().unwrap();
    assert_eq!(
        a_done.applied + b_done.applied,
        200,
        "{a_done:?} {b_done:?}"
    );
    assert_eq!(a_done.handed_over, 2, "A gave two segments up: {a_done:?}");
    assert!(b_done.applied > 0, "{b_done:?}");
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, 200).await;
    assert_partition_order(&repo).await;
    // Stopped cleanly: nothing held any more.
    let look = holders(&s.locks, 4).await;
    assert!(look.iter().all(Vec::is_empty), "{look:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_runners_hold_two_segments_each_of_six() {
    let s = setup().await;
    let stop = CancellationToken::new();
    let ids = ["seg-a", "seg-b", "seg-c"];
    let mut tasks = Vec::new();
    for id in ids {
        let r = Arc::new(segmented(&s.db, &s.feed, 6, 10, Duration::ZERO));
        tasks.push(spawn(&r, &manager(&s, id), &stop));
    }
    append_committed(&s.db, &s.feed, 1, 300).await;
    let look = wait_balanced(&s.locks, 6, &ids, |n| n == 2).await;
    for id in ids {
        assert_eq!(look.iter().filter(|h| h == &&[id]).count(), 2, "{look:?}");
    }
    wait_all_applied(&s.db, 6, 300).await;
    stop.cancel();
    let mut applied = 0;
    for t in tasks {
        applied += t.await.unwrap().unwrap().applied;
    }
    assert_eq!(applied, 300);
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, 300).await;
    assert_partition_order(&repo).await;
}

/// Four segments, three runners: the third comes when the first two run
/// two each, and still gets one (2, 1, 1), where a share of ceil(4 / 3)
/// alone would leave it none for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_runner_gets_a_segment_when_the_split_is_uneven() {
    let s = setup().await;
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for id in ["seg-a", "seg-b"] {
        let r = Arc::new(segmented(&s.db, &s.feed, 4, 5, Duration::ZERO));
        tasks.push(spawn(&r, &manager(&s, id), &stop));
    }
    let look = wait_balanced(&s.locks, 4, &["seg-a", "seg-b"], |n| n == 2).await;
    assert!(look.iter().all(|h| h.len() == 1), "{look:?}");
    let c = Arc::new(segmented(&s.db, &s.feed, 4, 5, Duration::ZERO));
    tasks.push(spawn(&c, &manager(&s, "seg-c"), &stop));
    let ids = ["seg-a", "seg-b", "seg-c"];
    let look = wait_balanced(&s.locks, 4, &ids, |n| n == 1 || n == 2).await;
    for id in ids {
        let held = look.iter().filter(|h| h == &&[id]).count();
        assert!((1..=2).contains(&held), "{id} holds {held}: {look:?}");
    }
    append_committed(&s.db, &s.feed, 1, 100).await;
    wait_all_applied(&s.db, 4, 100).await;
    stop.cancel();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, 100).await;
    assert_partition_order(&repo).await;
}

/// `run` is cancel safe: a dropped run leaves nothing held and loses no
/// event; the next runner takes every segment and finishes the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_leaves_nothing_held_and_the_next_runner_finishes() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 120).await;
    let locks = manager(&s, "seg-dropped");
    let first = segmented(&s.db, &s.feed, 3, 5, Duration::from_millis(2));
    let stop = CancellationToken::new();
    let watch =
        PostgresCheckpointWatch::start(&s.db, &Segment::new(0, 3).unwrap().projection_name(NAME));
    {
        let run = first.run(&locks, &stop);
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => panic!("the run ended by itself: {r:?}"),
            c = watch.wait_for(10, Some(Duration::from_secs(60))) => { c.unwrap(); }
        }
    } // dropped mid-batch, most likely
    let next = Arc::new(segmented(&s.db, &s.feed, 3, 5, Duration::ZERO));
    let task = spawn(&next, &manager(&s, "seg-next"), &stop);
    let look = wait_balanced(&s.locks, 3, &["seg-next"], |n| n == 3).await;
    assert!(look.iter().all(|h| h == &["seg-next"]), "{look:?}");
    wait_all_applied(&s.db, 3, 120).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, 120).await;
    assert_partition_order(&repo).await;
}

#[tokio::test]
async fn a_segment_runner_with_the_wrong_name_or_feed_is_refused() {
    let s = setup().await;
    let wrong_name = SegmentedRunner::new(NAME, 2, |segment| {
        let projection =
            ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>()).named(NAME);
        ProjectionRunner::new(projection, segment.feed(s.feed.clone(), key))
    });
    let e = wrong_name.unwrap_err().to_string();
    assert!(e.contains("seen/segment-0-of-2"), "{e}");
    let wrong_feed = SegmentedRunner::new(NAME, 2, |segment| {
        let projection = ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>())
            .named(segment.projection_name(NAME));
        let other = Segment::new(0, 3).unwrap();
        ProjectionRunner::new(projection, other.feed(s.feed.clone(), key))
    });
    let e = wrong_feed.unwrap_err().to_string();
    assert!(e.contains("segment 0 of 3"), "{e}");
    let none = SegmentedRunner::new(NAME, 0, |segment| {
        let projection = ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>())
            .named(segment.projection_name(NAME));
        ProjectionRunner::new(projection, segment.feed(s.feed.clone(), key))
    });
    assert!(none.is_err(), "0 segments refused");
}
