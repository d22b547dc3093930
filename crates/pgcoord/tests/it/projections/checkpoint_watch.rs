//! `PostgresCheckpointWatch` sees every move of the checkpoint, also the
//! ones a batch makes when it falls back to one event per transaction.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::postgres::{PostgresCheckpointWatch, PostgresDatabase};
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::support::*;

/// The first batch is applied whole (the watch sees it: it listens); the
/// next fails once at its second event, so it is applied again one event
/// per transaction, and the watch in another pool must see where that
/// left the checkpoint, woken by a notification (it reads nothing else).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_the_checkpoint_of_a_batch_applied_event_by_event() {
    let s = setup().await;
    let elsewhere = PostgresDatabase::connect(&s.test_db.url()).await.unwrap();
    let watch = PostgresCheckpointWatch::start(&elsewhere, "seen");
    let picky = Picky::default();
    picky.flaky.lock().unwrap().insert(3, 1);
    let projection = ReadModelProjection::new(picky, s.db.repository::<Seen>())
        .named("seen")
        .with_classifier(transient_in_test);
    let r = Arc::new(
        ProjectionRunner::new(projection, s.feed.clone())
            .batch_size(10)
            .idle_interval(None),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (r, locks, stop) = (r.clone(), s.locks.clone(), stop.clone());
        async move { r.run(&locks, &stop).await }
    });
    append_committed(&s.db, &s.feed, 1, 1).await;
    let first = watch.wait_for(1, Some(Duration::from_secs(60))).await;
    assert_eq!(first.unwrap(), 1);

    append_committed(&s.db, &s.feed, 2, 4).await;
    let seen = watch.wait_for(4, Some(Duration::from_secs(60))).await;
    assert_eq!(
        seen.unwrap(),
        4,
        "the watch missed the event-by-event commits"
    );
    let handler = r.projection().handler();
    assert_eq!(handler.attempts_at(3), 2, "the batch failed once at 3");
    assert_eq!(handler.attempts_at(2), 2, "2 was applied again on its own");
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().applied, 4);
    assert_each_applied_once(&s.db.repository::<Seen>(), 4).await;
}
