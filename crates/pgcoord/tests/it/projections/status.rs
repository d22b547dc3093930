//! `projection_status`: checkpoint, head, lag, the runner holding the
//! lock; `eta_seconds`.

use std::sync::Arc;

use pgcoord::readmodels::postgres::projection_status;
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::DistributedLock;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, reach, runner, setup};
use super::support::{Recorder, Seen};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_names_checkpoint_head_lag_and_runner() {
    let s = setup().await;
    let client = s.test_db.connect().await.unwrap();
    // Before anything ran: no checkpoint table yet, no runner.
    let before = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(
        (before.checkpoint, before.head, before.lag_events),
        (None, None, Some(0))
    );
    assert!(before.runner.is_none());
    assert_eq!(before.parked, 0, "no dead-letter table: none parked");

    append_committed(&s.db, &s.feed, 1, 10).await;
    let r = runner(&s.db, &s.feed, "seen");
    let stop = CancellationToken::new();
    let mut task = tokio::spawn({
        let (r, l, s) = (r.clone(), s.locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    reach(&r, &mut task, 10).await;
    let running = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(running.checkpoint, Some(10));
    assert_eq!(
        (running.head, running.lag_events, running.lag_seconds),
        (Some(10), Some(0), Some(0.0))
    );
    assert_eq!(running.eta_seconds(), Some(0.0));
    let runner_info = running.runner.expect("the runner holds the lock");
    assert_eq!(runner_info.holder_id.as_deref(), Some("runner-test"));
    assert!(runner_info.backend_pid > 0);
    assert!(running.checkpoint_updated_at.is_some());

    stop.cancel();
    task.await.unwrap().unwrap();
    append_committed(&s.db, &s.feed, 11, 15).await;
    let behind = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(
        (behind.checkpoint, behind.head, behind.lag_events),
        (Some(10), Some(15), Some(5))
    );
    assert!(behind.lag_seconds.unwrap() >= 0.0);
    assert!(
        behind.runner.is_none(),
        "the stopped runner released its lock"
    );
    let json = serde_json::to_value(&behind).unwrap();
    assert_eq!(json["lag_events"], 5);
    assert_eq!(json["parked"], 0, "no dead-letter table: none parked");

    let err = projection_status(&client, "seen", Some("Bad-Name"))
        .await
        .unwrap_err();
    assert!(matches!(err, pgcoord::Error::InvalidArgument(_)), "{err}");
    let err = projection_status(&client, "seen", Some("no_such_table"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no event table"), "{err}");
}

/// Moves the projection's progress samples and checkpoint `secs` seconds
/// into the past (time passing, without waiting for it).
async fn age(client: &tokio_postgres::Client, samples: f64, checkpoint: f64) {
    client
        .execute(
            r#"UPDATE "eventsource_projection_progress" SET "at" = "at" - make_interval(secs => $1) WHERE "projection" = 'seen'"#,
            &[&samples],
        )
        .await
        .unwrap();
    client
        .execute(
            r#"UPDATE "eventsource_projection_checkpoints" SET "updated_at" = "updated_at" - make_interval(secs => $1) WHERE "projection" = 'seen'"#,
            &[&checkpoint],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_one_batch_counts_in_the_rate_and_zero_means_the_checkpoint_stood_still() {
    let s = setup().await;
    let client = s.test_db.connect().await.unwrap();
    append_committed(&s.db, &s.feed, 1, 300).await;
    let projection =
        ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>()).named("seen");
    let r = Arc::new(
        ProjectionRunner::new(projection, s.feed.clone())
            .batch_size(300)
            .idle_interval(None),
    );
    let stop = CancellationToken::new();
    let mut task = tokio::spawn({
        let (r, l, s) = (r.clone(), s.locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    reach(&r, &mut task, 300).await;
    stop.cancel();
    let summary = task.await.unwrap().unwrap();
    assert_eq!((summary.applied, summary.batches), (300, 1));

    // The run's one sample is from before its batch, where it started.
    let samples: Vec<i64> = client
        .query(
            r#"SELECT "position" FROM "eventsource_projection_progress" WHERE "projection" = 'seen'"#,
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(samples, [0]);
    let status = |client| async move {
        projection_status(client, "seen", Some("events"))
            .await
            .unwrap()
            .events_per_second
    };
    let now = status(&client).await;
    assert!(
        now.is_none_or(|r| r > 0.0),
        "300 events just applied: {now:?}"
    );

    // Ten seconds later: 300 events over about ten seconds.
    age(&client, 10.0, 10.0).await;
    let rate = status(&client).await.expect("a rate");
    assert!(rate > 0.0, "{rate}");

    // A sample taken after the batch, at the checkpoint it reached (no
    // sample from before it in the window): unknown, not 0.0.
    client
        .execute(
            r#"UPDATE "eventsource_projection_progress" SET "position" = 300 WHERE "projection" = 'seen'"#,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(status(&client).await, None);

    // Two minutes on, the checkpoint has not moved within the last minute:
    // nothing was applied in it.
    age(&client, 120.0, 120.0).await;
    assert_eq!(status(&client).await, Some(0.0));
}

/// A runner holds the lock, events wait, and neither the checkpoint nor
/// the oldest waiting event has moved for a while: the status says since
/// when it is stalled and gives no ETA, though the rate of the last minute
/// (from before the stall) is above zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_standing_still_with_events_waiting_is_stalled_with_no_eta() {
    let s = setup().await;
    let client = s.test_db.connect().await.unwrap();
    append_committed(&s.db, &s.feed, 1, 300).await;
    let projection =
        ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>()).named("seen");
    let r = Arc::new(ProjectionRunner::new(projection, s.feed.clone()).batch_size(300));
    let stop = CancellationToken::new();
    let mut task = tokio::spawn({
        let (r, l, s) = (r.clone(), s.locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    reach(&r, &mut task, 300).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    // Another runner holds the lock and applies nothing (frozen, stuck).
    let _stuck = s.locks.acquire("projection:seen", None).await.unwrap();
    append_committed(&s.db, &s.feed, 301, 310).await;
    let fresh = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(fresh.stalled_since, None, "the events only just came");

    // Thirty seconds on: the checkpoint moved 30 s ago, the events have
    // waited 20 s, the last minute's rate is from before.
    age(&client, 30.0, 30.0).await;
    client
        .execute(
            r#"UPDATE "events" SET "recorded_at" = "recorded_at" - interval '20 seconds' WHERE "position" > 300"#,
            &[],
        )
        .await
        .unwrap();
    let stalled = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(stalled.lag_events, Some(10));
    assert!(stalled.runner.is_some(), "a runner holds the lock");
    assert!(
        stalled.events_per_second.is_some_and(|r| r > 0.0),
        "{stalled:?}"
    );
    let since = stalled.stalled_since.expect("stalled");
    let moved = stalled.checkpoint_updated_at.unwrap();
    assert!(
        since > moved,
        "since the first waiting event came: {since} {moved}"
    );
    assert_eq!(stalled.eta_seconds(), None, "no ETA while stalled");
}
