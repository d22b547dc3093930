//! Poison events on PostgreSQL: parked after the retry policy's attempts
//! with the checkpoint moving on, transient failures retried and applied,
//! partitions held behind their parked event, replay through the handler
//! in order, drop, and replays marked for the running runner.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::postgres::{
    projection_status, request_replay, PostgresDatabase, PostgresEventTable,
    PostgresReadModelRepository,
};
use pgcoord::readmodels::DeadLetterSelection;
use pgcoord::readmodels::{DeadLetterPolicy, ProjectionRunner, ReadModelProjection, RetryPolicy};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup, Setup};
use super::support::*;

pub(super) type DlqRunner = ProjectionRunner<
    Picky,
    PostgresReadModelRepository<Seen, PostgresDatabase>,
    PostgresEventTable<Ev>,
>;

pub(super) type Task = tokio::task::JoinHandle<pgcoord::Result<pgcoord::readmodels::RunSummary>>;

pub(super) fn quick_retries(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(2),
        multiplier: 2.0,
    }
}

/// Odd and even events are two partitions.
pub(super) fn by_parity(e: &Ev) -> Option<String> {
    Some(if e.n % 2 == 0 { "even" } else { "odd" }.to_owned())
}

pub(super) fn dlq_runner(
    s: &Setup,
    handler: Picky,
    policy: DeadLetterPolicy<Ev>,
) -> Arc<DlqRunner> {
    dlq_runner_on(s, s.feed.clone(), handler, policy)
}

/// [`dlq_runner`] reading `feed` (another instance, as in another process).
pub(super) fn dlq_runner_on(
    s: &Setup,
    feed: PostgresEventTable<Ev>,
    handler: Picky,
    policy: DeadLetterPolicy<Ev>,
) -> Arc<DlqRunner> {
    let projection = ReadModelProjection::new(handler, s.db.repository::<Seen>())
        .named("seen")
        .with_retry(quick_retries(3))
        .with_classifier(transient_in_test);
    Arc::new(
        ProjectionRunner::new(projection, feed)
            .batch_size(4)
            .idle_interval(None)
            .with_dead_letters(policy),
    )
}

pub(super) fn spawn(r: &Arc<DlqRunner>, s: &Setup, stop: &CancellationToken) -> Task {
    let (r, l, st) = (r.clone(), s.locks.clone(), stop.clone());
    tokio::spawn(async move { r.run(&l, &st).await })
}

pub(super) async fn reach(r: &DlqRunner, task: &mut Task, position: i64) {
    let progress = r.progress();
    tokio::select! {
        c = progress.wait_for(position, Some(Duration::from_secs(60))) => { c.unwrap(); }
        stopped = task => panic!("the runner stopped before {position}: {stopped:?}"),
    }
}

pub(super) fn positions(letters: &[pgcoord::readmodels::DeadLetter]) -> Vec<i64> {
    letters.iter().map(|l| l.position).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_error_parks_the_event_after_the_attempts_and_the_checkpoint_moves_on() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 6).await;
    let r = dlq_runner(
        &s,
        Picky::poisoned(&[3]),
        DeadLetterPolicy::new().json_payload(),
    );
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 6).await;
    stop.cancel();
    let summary = task.await.unwrap().unwrap();
    assert_eq!((summary.applied, summary.parked), (5, 1));
    assert_eq!(r.projection().checkpoint().await.unwrap(), Some(6));
    assert_applied_once(&s.db.repository::<Seen>(), &[1, 2, 4, 5, 6]).await;
    // The batch's attempt, then the policy's three event by event.
    assert_eq!(r.projection().handler().attempts_at(3), 4);

    let letters = r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap();
    assert_eq!(positions(&letters), [3]);
    let l = &letters[0];
    assert_eq!(
        (l.attempts, l.partition.as_deref(), l.behind),
        (3, None, None)
    );
    assert!(l.error.contains("poison 3"), "{}", l.error);
    assert_eq!(l.payload, Some(serde_json::to_value(ev(3)).unwrap()));
    assert!(l.first_failure <= l.last_failure);
    let client = s.test_db.connect().await.unwrap();
    let status = projection_status(&client, "seen", None).await.unwrap();
    assert_eq!(status.parked, 1);

    // A row chrono cannot hold (an operator's edit) is an error, not a panic.
    client
        .execute(
            "UPDATE eventsource_projection_dead_letters SET first_failure = 'infinity'",
            &[],
        )
        .await
        .unwrap();
    let e = r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("first_failure"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_are_retried_then_applied_and_nothing_is_parked() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 4).await;
    let picky = Picky::default();
    picky.flaky.lock().unwrap().insert(2, 3);
    let r = dlq_runner(&s, picky, DeadLetterPolicy::new());
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 4).await;
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().parked, 0);
    assert_applied_once(&s.db.repository::<Seen>(), &[1, 2, 3, 4]).await;
    // The batch's failed attempt, then two failures and a success event by
    // event (the policy's three attempts).
    assert_eq!(r.projection().handler().attempts_at(2), 4);
    assert!(r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_that_stays_stops_the_run_and_parks_nothing() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 3).await;
    let picky = Picky::default();
    picky.flaky.lock().unwrap().insert(2, u32::MAX);
    let r = dlq_runner(&s, picky, DeadLetterPolicy::new());
    let err = r
        .run(&s.locks, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            pgcoord::Error::ReadModel(pgcoord::error::ReadModelError::ProjectionFailed {
                position: 2,
                attempts: 3,
                ..
            })
        ),
        "{err}"
    );
    assert!(r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(r.projection().checkpoint().await.unwrap(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_is_held_behind_its_parked_event_and_replayed_in_order() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 8).await;
    let policy = DeadLetterPolicy::new().partition_by(by_parity);
    let r = dlq_runner(&s, Picky::poisoned(&[3]), policy);
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 8).await;
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().parked, 3);
    let repo = s.db.repository::<Seen>();
    assert_applied_once(&repo, &[1, 2, 4, 6, 8]).await;
    let letters = r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap();
    assert_eq!(positions(&letters), [3, 5, 7]);
    assert_eq!(letters[1].behind, Some(3));
    assert_eq!(letters[2].error, "behind position 3");
    assert_eq!(letters[1].attempts, 0);
    assert_eq!(letters[1].partition.as_deref(), Some("odd"));
    // One clock, the server's: the failed event's first failure is not
    // after its last, and an event held behind it was parked at one time.
    assert!(letters[0].first_failure <= letters[0].last_failure);
    for l in &letters[1..] {
        assert_eq!(l.first_failure, l.last_failure, "{l:?}");
    }

    // Still poisoned: the replay fails at the head, records it, and keeps
    // the partition parked.
    let failed = r
        .replay_dead_letters(&DeadLetterSelection::Positions(vec![3]))
        .await
        .unwrap();
    assert_eq!((failed.applied, positions_of(&failed.failed)), (0, vec![3]));
    let after = r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap();
    assert_eq!(positions(&after), [3, 5, 7]);
    assert_eq!(after[0].attempts, 4, "one more attempt recorded");

    // Cured: replaying the head applies the partition in order and empties it.
    r.projection().handler().cure();
    let before = r.projection().handler().inner.order.lock().unwrap().len();
    let done = r
        .replay_dead_letters(&DeadLetterSelection::Positions(vec![3]))
        .await
        .unwrap();
    assert_eq!((done.applied, done.failed.len()), (3, 0));
    let order = r.projection().handler().inner.order.lock().unwrap()[before..].to_vec();
    assert_eq!(order, [3, 5, 7]);
    assert!(r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap()
        .is_empty());
    assert_each_applied_once(&repo, 8).await;
    assert_eq!(
        r.projection().checkpoint().await.unwrap(),
        Some(8),
        "replay leaves the checkpoint"
    );
}

/// Cancel safety of `replay_dead_letters`: dropped inside the handler of
/// the second event of a partition, the first is applied and removed, the
/// second and third neither; replaying again applies them once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_dropped_midway_leaves_each_event_applied_and_removed_or_neither() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 6).await;
    let policy = DeadLetterPolicy::new().partition_by(by_parity);
    let r = dlq_runner(&s, Picky::poisoned(&[1]), policy);
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 6).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let all = DeadLetterSelection::All;
    assert_eq!(
        positions(&r.list_dead_letters(&all).await.unwrap()),
        [1, 3, 5]
    );

    let handler = r.projection().handler();
    handler.cure();
    let (tx, stalled) = tokio::sync::oneshot::channel();
    *handler.stall_at.lock().unwrap() = Some((3, tx));
    tokio::select! {
        done = r.replay_dead_letters(&all) => panic!("the replay stalls at 3: {done:?}"),
        _ = stalled => {} // the replay future is dropped here, inside 3's transaction
    }
    assert_eq!(positions(&r.list_dead_letters(&all).await.unwrap()), [3, 5]);
    let repo = s.db.repository::<Seen>();
    assert_applied_once(&repo, &[1, 2, 4, 6]).await;

    let done = r.replay_dead_letters(&all).await.unwrap();
    assert_eq!((done.applied, done.failed.len()), (2, 0));
    assert_each_applied_once(&repo, 6).await;
    let order = handler.inner.order.lock().unwrap().clone();
    assert_eq!(
        &order[order.len() - 3..],
        [1, 3, 5],
        "the partition in order"
    );
}

fn positions_of(failed: &[(i64, String)]) -> Vec<i64> {
    failed.iter().map(|(p, _)| *p).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_dead_letters_are_gone_without_being_applied() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 5).await;
    let r = dlq_runner(&s, Picky::poisoned(&[1, 2, 4]), DeadLetterPolicy::new());
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 5).await;
    stop.cancel();
    task.await.unwrap().unwrap();
    let two = DeadLetterSelection::Positions(vec![2, 99]);
    assert_eq!(r.drop_dead_letters(&two).await.unwrap(), 1);
    let left = r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap();
    assert_eq!(positions(&left), [1, 4]);
    assert_eq!(
        r.drop_dead_letters(&DeadLetterSelection::All)
            .await
            .unwrap(),
        2
    );
    assert!(r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap()
        .is_empty());
    assert_applied_once(&s.db.repository::<Seen>(), &[3, 5]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_marked_for_replay_are_applied_by_the_running_runner() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 4).await;
    let r = dlq_runner(&s, Picky::poisoned(&[2]), DeadLetterPolicy::new());
    let stop = CancellationToken::new();
    let mut task = spawn(&r, &s, &stop);
    reach(&r, &mut task, 4).await;
    r.projection().handler().cure();
    // What `eventsource projection dlq replay` does, from another client.
    let client = s.db.get().await.unwrap();
    let marked = request_replay(&*client, "seen", &DeadLetterSelection::All)
        .await
        .unwrap();
    assert_eq!(marked, 1);
    // The runner replays marked entries before its next batch.
    append_committed(&s.db, &s.feed, 5, 5).await;
    reach(&r, &mut task, 5).await;
    assert!(r
        .list_dead_letters(&DeadLetterSelection::All)
        .await
        .unwrap()
        .is_empty());
    stop.cancel();
    task.await.unwrap().unwrap();
    assert_each_applied_once(&s.db.repository::<Seen>(), 5).await;
}

/// The parked-events gauge and counter, per projection, through a
/// Prometheus recorder local to this test's thread.
#[cfg(feature = "metrics")]
#[test]
fn parked_events_are_a_gauge_and_a_counter_per_projection() {
    let text = crate::recorder::recorded(|| async {
        let s = setup().await;
        append_committed(&s.db, &s.feed, 1, 4).await;
        let r = dlq_runner(&s, Picky::poisoned(&[2, 3]), DeadLetterPolicy::new());
        let stop = CancellationToken::new();
        let progress = r.progress();
        let watch = async {
            progress
                .wait_for(4, Some(Duration::from_secs(60)))
                .await
                .unwrap();
            stop.cancel();
        };
        let (summary, ()) = tokio::join!(r.run(&s.locks, &stop), watch);
        assert_eq!(summary.unwrap().parked, 2);
        let one = DeadLetterSelection::Positions(vec![2]);
        assert_eq!(r.drop_dead_letters(&one).await.unwrap(), 1);
    });
    assert!(
        text.contains(r#"eventsource_projection_events_parked_total{projection="seen"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"eventsource_projection_parked_events{projection="seen"} 1"#),
        "one left after the drop: {text}"
    );
}
