//! The live version's parked events at the switch: the rebuilt version
//! applied them through its own handler, so the switch removes them (a
//! replay would apply them twice); what is parked later stays.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::DeadLetterSelection;
use pgcoord::readmodels::{DeadLetterPolicy, ProjectionRunner, ReadModelProjection, RetryPolicy};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::rebuild::{marked, texts};
use super::rebuild_support::*;
use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_removes_the_parked_events_the_new_version_applied() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 8).await;
    let projection =
        ReadModelProjection::new(Picky::poisoned(&[3, 6, 10]), s.db.repository::<Seen>())
            .named("seen")
            .with_retry(RetryPolicy {
                max_attempts: 2,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(1),
                multiplier: 1.0,
            });
    let live = Arc::new(
        ProjectionRunner::new(projection, s.feed.clone())
            .batch_size(4)
            .idle_interval(None)
            .with_dead_letters(DeadLetterPolicy::new().json_payload()),
    );
    let stop = CancellationToken::new();
    let task = {
        let (r, l, st) = (live.clone(), s.locks.clone(), stop.clone());
        tokio::spawn(async move { r.run(&l, &st).await })
    };
    let progress = live.progress();
    progress
        .wait_for(8, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let parked = |r: Arc<_>| async move {
        let r: Arc<ProjectionRunner<Picky, Repo, _>> = r;
        let letters = r
            .list_dead_letters(&DeadLetterSelection::All)
            .await
            .unwrap();
        letters.iter().map(|l| l.position).collect::<Vec<i64>>()
    };
    assert_eq!(parked(live.clone()).await, [3, 6]);

    let rebuild = rebuild_with(&s.db, &s.feed, Marked::new("rebuilt"));
    let summary = rebuild
        .run(&s.locks, &CancellationToken::new())
        .await
        .unwrap();
    assert!(
        summary.switched && summary.checkpoint == Some(8),
        "{summary:?}"
    );
    assert!(
        parked(live.clone()).await.is_empty(),
        "applied by the new version"
    );
    assert_eq!(texts(&s).await, marked("rebuilt", 1, 8));

    // Later poison is parked as before, by the live runner on the new table.
    append_committed(&s.db, &s.feed, 9, 12).await;
    progress
        .wait_for(12, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(parked(live.clone()).await, [10]);
    stop.cancel();
    task.await.unwrap().unwrap();
}
