//! Replays of parked events on PostgreSQL: one runs beside any open
//! transaction of the cluster (it reads the parked event at its position,
//! while tailing still waits for older transactions).

use pgcoord::readmodels::postgres::PostgresEventTable;
use pgcoord::readmodels::{DeadLetterPolicy, DeadLetterSelection, EventFeed, Segment};
use tokio_util::sync::CancellationToken;

use super::dead_letters::{dlq_runner, dlq_runner_on, positions, reach, spawn};
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
