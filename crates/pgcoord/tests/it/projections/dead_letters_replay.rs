//! Replays of parked events on PostgreSQL: one runs beside any open
//! transaction of the cluster (it reads the parked event at its position,
//! while tailing still waits for older transactions), a replay request
//! that fails is tried once, not before every batch, and the privileges a
//! replay needs.

use std::sync::Arc;

use pgcoord::readmodels::postgres::{request_replay, PostgresDatabase, PostgresEventTable};
use pgcoord::readmodels::{DeadLetterPolicy, DeadLetterSelection, EventFeed, Segment};
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::PostgresLockManager;
use tokio_util::sync::CancellationToken;

use super::dead_letters::{
    by_parity, dlq_runner, dlq_runner_on, positions, quick_retries, reach, spawn,
};
use super::postgres::{append_committed, setup};
use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_event_replays_while_an_unrelated_transaction_holds_an_xid() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 6).await;
    let r = dlq_runner(&s, Picky::poisoned(&[3]), DeadLetterPolicy::new());
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 6).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let all = DeadLetterSelection::All;
    assert_eq!(positions(&r.list_dead_letters(&all).await.unwrap()), [3]);

    // Another session's transaction, with a transaction id, stays open.
    let mut other = s.test_db.connect().await.unwrap();
    let open = other.transaction().await.unwrap();
    open.query_one("SELECT pg_current_xact_id()", &[])
        .await
        .unwrap();

    // The replay as another process does it: a feed of its own, fresh.
    let feed = PostgresEventTable::<Ev>::new(s.db.clone(), "events").unwrap();
    // Tailing keeps its safeguard: nothing is handed out while a
    // transaction older than the feed's look runs.
    let tail = feed.read_after(None, 10).await.unwrap();
    assert!(tail.is_empty(), "tailing went past an open transaction");
    let replayer = dlq_runner_on(&s, feed, Picky::default(), DeadLetterPolicy::new());
    let done = replayer
        .replay_dead_letters(&DeadLetterSelection::Positions(vec![3]))
        .await
        .unwrap();
    assert_eq!(done.applied, 1, "{:?}", done.failed);
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    assert!(replayer.list_dead_letters(&all).await.unwrap().is_empty());
    assert_each_applied_once(&s.db.repository::<Seen>(), 6).await;
    open.rollback().await.unwrap();
}

/// A segment's feed reads at a position only an event of its own segment
/// (a segment's parked events are its own), past an open transaction too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_feed_reads_at_a_position_only_its_own_events() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 9).await;
    let mut other = s.test_db.connect().await.unwrap();
    let open = other.transaction().await.unwrap();
    open.query_one("SELECT pg_current_xact_id()", &[])
        .await
        .unwrap();
    let fresh = PostgresEventTable::<Ev>::new(s.db.clone(), "events").unwrap();
    let key = |e: &Ev| format!("agg-{}", e.n % 5);
    for n in 1..=9 {
        let owner = Segment::of_key(&key(&ev(n)), 3).unwrap();
        for i in 0..3 {
            let segment = Segment::new(i, 3).unwrap();
            let got = segment.feed(fresh.clone(), key).read_at(n).await.unwrap();
            let want = (segment == owner).then(|| ev(n));
            assert_eq!(got, want, "event {n} read by {segment}");
        }
    }
    assert_eq!(fresh.read_at(10).await.unwrap(), None, "no event there");
    open.rollback().await.unwrap();
}

/// `dlq replay NAME --all`, then a request for an event held behind the
/// partition's head, while the handler still fails: the running runner
/// tries each request once (one more attempt at the head), and no mark is
/// left for it to try again before its next batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_replay_request_is_tried_once_not_before_every_batch() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 8).await;
    let policy = DeadLetterPolicy::new().partition_by(by_parity);
    let r = dlq_runner(&s, Picky::poisoned(&[3]), policy);
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 8).await;
    let all = DeadLetterSelection::All;
    let letters = r.list_dead_letters(&all).await.unwrap();
    assert_eq!(positions(&letters), [3, 5, 7]);
    assert_eq!(letters[0].attempts, 3);

    let client = s.db.get().await.unwrap();
    let requests = [
        (DeadLetterSelection::All, 3),
        (DeadLetterSelection::Positions(vec![5]), 1),
    ];
    let mut next = 9;
    for (attempts, (selection, marked)) in (4..).zip(requests) {
        let n = request_replay(&*client, "seen", &selection).await.unwrap();
        assert_eq!(n, marked);
        // The runner replays the marks before a batch: the head fails...
        append_committed(&s.db, &s.feed, next, next + 1).await;
        reach(&r, &mut task, next + 1).await;
        // ... and before the following ones there is nothing to replay.
        append_committed(&s.db, &s.feed, next + 2, next + 3).await;
        reach(&r, &mut task, next + 3).await;
        next += 4;
        let letters = r.list_dead_letters(&all).await.unwrap();
        assert_eq!(letters[0].position, 3);
        assert_eq!(letters[0].attempts, attempts, "one attempt per request");
        assert!(
            letters[0].error.contains("poison 3"),
            "{}",
            letters[0].error
        );
        let marked: Vec<i64> = letters
            .iter()
            .filter(|l| l.replay_requested)
            .map(|l| l.position)
            .collect();
        assert!(marked.is_empty(), "still marked: {marked:?}");
    }
    stop.cancel();
    task.await.unwrap().unwrap();
    let evens: Vec<i64> = (1..next).filter(|n| n % 2 == 0 || *n == 1).collect();
    assert_applied_once(&s.db.repository::<Seen>(), &evens).await;
}

/// The privileges docs/projections.md lists: a role with SELECT, INSERT
/// and UPDATE runs a runner that parks events; replaying them also needs
/// DELETE on the dead-letter table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dml_role_parks_events_and_replays_them_with_delete_on_the_dead_letters() {
    let s = setup().await;
    // The owner runs once: every table exists.
    append_committed(&s.db, &s.feed, 1, 2).await;
    let owner = dlq_runner(&s, Picky::default(), DeadLetterPolicy::new());
    let stop = CancellationToken::new();
    let mut task = spawn(&owner, &s, &stop);
    reach(&owner, &mut task, 2).await;
    stop.cancel();
    task.await.unwrap().unwrap();

    let admin = s.test_db.connect().await.unwrap();
    let role = format!("dlq_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'dlq-pw';
             REVOKE CREATE ON SCHEMA public FROM PUBLIC;
             GRANT USAGE ON SCHEMA public TO {role};
             GRANT SELECT, INSERT, UPDATE ON events, seen, eventsource_projection_checkpoints,
                 eventsource_projection_progress, eventsource_projection_dead_letters TO {role};
             GRANT USAGE, SELECT ON SEQUENCE events_position_seq TO {role};"
        ))
        .await
        .unwrap();
    let mut config = s.test_db.config();
    config.user(&role).password("dlq-pw");
    let db = PostgresDatabase::builder(config.clone().into())
        .max_size(4)
        .build()
        .unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    let projection = ReadModelProjection::new(Picky::poisoned(&[3]), db.repository::<Seen>())
        .named("seen")
        .with_retry(quick_retries(2));
    let r = Arc::new(
        ProjectionRunner::new(projection, feed)
            .batch_size(4)
            .idle_interval(None)
            .with_dead_letters(DeadLetterPolicy::new()),
    );
    let locks = PostgresLockManager::builder(config.into())
        .holder_id("dlq-role")
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let mut task = tokio::spawn({
        let (r, locks, stop) = (r.clone(), locks.clone(), stop.clone());
        async move { r.run(&locks, &stop).await }
    });
    append_committed(&s.db, &s.feed, 3, 4).await;
    reach(&r, &mut task, 4).await;
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().parked, 1);
    let all = DeadLetterSelection::All;
    assert_eq!(positions(&r.list_dead_letters(&all).await.unwrap()), [3]);

    r.projection().handler().cure();
    let denied = r.replay_dead_letters(&all).await.unwrap();
    assert_eq!(denied.applied, 0);
    let (position, error) = &denied.failed[0];
    assert_eq!(*position, 3);
    assert!(error.contains("permission denied"), "{error}");

    admin
        .batch_execute(&format!(
            "GRANT DELETE ON eventsource_projection_dead_letters TO {role}"
        ))
        .await
        .unwrap();
    let done = r.replay_dead_letters(&all).await.unwrap();
    assert_eq!((done.applied, done.failed.len()), (1, 0));
    assert!(r.list_dead_letters(&all).await.unwrap().is_empty());
    assert_applied_once(&s.db.repository::<Seen>(), &[1, 2, 3, 4]).await;
    drop((r, db, locks));
    admin
        .batch_execute(&format!("DROP OWNED BY {role}"))
        .await
        .unwrap();
}
