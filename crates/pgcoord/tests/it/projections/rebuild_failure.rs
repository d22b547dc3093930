//! A rebuild's batch that fails is replayed one event per transaction, as
//! the live runner's is: the events before the poison event are kept (the
//! version's checkpoint stops right before it), transient failures are
//! retried per event, and the failure names the version's checkpoint and
//! the event's position; run again after the fix, the rebuild resumes.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::error::ReadModelError;
use pgcoord::readmodels::{
    ProjectionRebuild, ReadModelProjection, RetryPolicy, VersionedReadModels,
};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::rebuild_support::checkpoint_row;
use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_rebuild_batch_is_replayed_per_event_and_names_the_poison_position() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 10).await;
    // The live version at 10: the rebuild does not take a feed that holds
    // positions back (other transactions of the cluster) for its end.
    let live =
        ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>()).named("seen");
    live.catch_up((1..=10).map(|n| (n, ev(n)))).await.unwrap();
    let handler = Picky::poisoned(&[7]);
    handler.flaky.lock().unwrap().insert(2, 2);
    let projection = ReadModelProjection::new(handler, s.db.repository::<Seen>())
        .named("seen")
        .with_classifier(transient_in_test)
        .with_retry(RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(1),
            multiplier: 1.0,
        });
    let rebuild = Arc::new(ProjectionRebuild::new(projection, s.feed.clone()).batch_size(4));

    let err = rebuild
        .run(&s.locks, &CancellationToken::new())
        .await
        .unwrap_err();
    match &err {
        pgcoord::Error::ReadModel(ReadModelError::ProjectionFailed {
            projection,
            position,
            attempts,
            cause,
        }) => {
            assert_eq!(
                (projection.as_str(), *position, *attempts),
                ("seen@v2", 7, 1)
            );
            assert!(cause.to_string().contains("poison 7"), "{cause}");
        }
        other => panic!("expected ProjectionFailed, got {other:?}"),
    }
    // Batch 1..=4 committed (after 2 was retried alone), 5 and 6 each in a
    // transaction of their own, 7 failed: the checkpoint is right before it.
    assert_eq!(checkpoint_row(&s.db, "seen@v2").await, Some(6));
    let v2 = s.db.repository::<Seen>().at_version(2).unwrap();
    assert_applied_once(&v2, &[1, 2, 3, 4, 5, 6]).await;
    let handler = rebuild.projection().handler();
    assert_eq!(handler.attempts_at(2), 3, "in the batch, alone, retried");
    assert_eq!(handler.attempts_at(7), 2, "in its batch, then alone");
    assert_eq!(
        checkpoint_row(&s.db, "seen").await,
        Some(10),
        "live untouched"
    );
    assert_eq!(live.backend().versions("seen").await.unwrap().current, 1);

    // Fixed, the rebuild resumes after 6 and switches.
    handler.cure();
    let summary = rebuild
        .run(&s.locks, &CancellationToken::new())
        .await
        .unwrap();
    assert!(summary.switched, "{summary:?}");
    assert_eq!(
        (summary.version, summary.applied, summary.checkpoint),
        (2, 4, Some(10))
    );
    assert_each_applied_once(&s.db.repository::<Seen>(), 10).await;
}
