//! The runner on the in-memory adapters: tail, wake, shutdown, take-over,
//! read-your-writes, cancellation.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::{InMemoryFeed, InMemoryReadModelRepository};
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::{DistributedLock, InMemoryLockManager};
use tokio_util::sync::CancellationToken;

use super::support::*;

type Runner = ProjectionRunner<Recorder, InMemoryReadModelRepository<Seen>, InMemoryFeed<Ev>>;

fn runner(repo: &InMemoryReadModelRepository<Seen>, feed: &InMemoryFeed<Ev>) -> Arc<Runner> {
    let projection = ReadModelProjection::new(Recorder::default(), repo.clone()).named("seen");
    // Only the feed's signal wakes it: a missed wake-up would hang the test.
    Arc::new(
        ProjectionRunner::new(projection, feed.clone())
            .batch_size(3)
            .idle_interval(None),
    )
}

#[tokio::test]
async fn a_runner_tails_the_feed_and_stops_on_shutdown() {
    let (repo, feed, locks) = (
        InMemoryReadModelRepository::new(),
        InMemoryFeed::new(),
        InMemoryLockManager::new(None),
    );
    for n in 1..=5 {
        feed.append(ev(n));
    }
    let r = runner(&repo, &feed);
    let progress = r.progress();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (r, locks, stop) = (r.clone(), locks.clone(), stop.clone());
        async move { r.run(&locks, &stop).await }
    });
    assert_eq!(progress.wait_for(5, None).await.unwrap(), 5);
    for n in 6..=8 {
        feed.append(ev(n));
    }
    assert_eq!(progress.wait_for(8, None).await.unwrap(), 8);
    stop.cancel();
    let summary = task.await.unwrap().unwrap();
    assert_eq!((summary.applied, summary.checkpoint), (8, Some(8)));
    assert_each_applied_once(&repo, 8).await;
    assert_eq!(
        *r.projection().handler().order.lock().unwrap(),
        (1..=8).collect::<Vec<_>>()
    );
    // The lock went with the run.
    let lock = locks
        .try_lock("projection:seen")
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap();
    assert!(lock.is_some(), "the runner lock was not released");
}

#[tokio::test]
async fn a_second_runner_waits_for_the_lock_and_resumes_at_the_checkpoint() {
    let (repo, feed, locks) = (
        InMemoryReadModelRepository::new(),
        InMemoryFeed::new(),
        InMemoryLockManager::new(None),
    );
    for n in 1..=4 {
        feed.append(ev(n));
    }
    let (first, second) = (runner(&repo, &feed), runner(&repo, &feed));
    let (stop_first, stop_second) = (CancellationToken::new(), CancellationToken::new());
    let a = tokio::spawn({
        let (r, l, s) = (first.clone(), locks.clone(), stop_first.clone());
        async move { r.run(&l, &s).await }
    });
    first.progress().wait_for(4, None).await.unwrap();
    let b = tokio::spawn({
        let (r, l, s) = (second.clone(), locks.clone(), stop_second.clone());
        async move { r.run(&l, &s).await }
    });
    stop_first.cancel();
    assert_eq!(a.await.unwrap().unwrap().applied, 4);
    for n in 5..=7 {
        feed.append(ev(n));
    }
    assert_eq!(second.progress().wait_for(7, None).await.unwrap(), 7);
    stop_second.cancel();
    let summary = b.await.unwrap().unwrap();
    assert_eq!(
        summary.applied, 3,
        "the second runner started at the first one's checkpoint"
    );
    assert_each_applied_once(&repo, 7).await;
}

#[tokio::test]
async fn dropping_a_run_releases_the_lock_and_loses_nothing() {
    let (repo, feed, locks) = (
        InMemoryReadModelRepository::new(),
        InMemoryFeed::new(),
        InMemoryLockManager::new(None),
    );
    for n in 1..=6 {
        feed.append(ev(n));
    }
    let r = runner(&repo, &feed);
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    r.progress().wait_for(3, None).await.unwrap();
    task.abort(); // the run's future is dropped wherever it is
    assert!(task.await.unwrap_err().is_cancelled());
    // The in-memory manager releases a dropped guard at once.
    assert!(
        locks
            .try_lock("projection:seen")
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))
            .unwrap()
            .is_some(),
        "the dropped run kept its lock"
    );
    locks.release("projection:seen").await.unwrap();
    let again = runner(&repo, &feed);
    let task = tokio::spawn({
        let (r, l, s) = (again.clone(), locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    again.progress().wait_for(6, None).await.unwrap();
    stop.cancel();
    task.await.unwrap().unwrap();
    assert_each_applied_once(&repo, 6).await;
}

#[tokio::test]
async fn wait_for_gives_up_after_its_timeout_and_says_where_the_checkpoint_is() {
    let (repo, feed, locks) = (
        InMemoryReadModelRepository::new(),
        InMemoryFeed::new(),
        InMemoryLockManager::new(None),
    );
    feed.append(ev(1));
    let r = runner(&repo, &feed);
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    r.progress().wait_for(1, None).await.unwrap();
    let err = r
        .progress()
        .wait_for(2, Some(Duration::from_millis(20)))
        .await
        .unwrap_err();
    let rm = err.as_read_model().expect("a read-model error");
    assert!(rm.is_not_caught_up(), "{err}");
    assert!(err.to_string().contains("Some(1)"), "{err}");
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_feed_without_a_signal_needs_an_idle_interval() {
    struct Silent;
    impl pgcoord::readmodels::EventFeed for Silent {
        type Event = Ev;
        async fn read_after(&self, _: Option<i64>, _: usize) -> pgcoord::Result<Vec<(i64, Ev)>> {
            Ok(Vec::new())
        }
    }
    let projection =
        ReadModelProjection::new(Recorder::default(), InMemoryReadModelRepository::new());
    let r = ProjectionRunner::new(projection, Silent).idle_interval(None);
    let err = r
        .run(&InMemoryLockManager::new(None), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, pgcoord::Error::InvalidArgument(_)), "{err}");
}

#[tokio::test]
async fn a_runner_that_loses_its_lock_stops_and_the_next_one_takes_over() {
    let (repo, feed, locks) = (
        InMemoryReadModelRepository::new(),
        InMemoryFeed::new(),
        InMemoryLockManager::new(None),
    );
    for n in 1..=3 {
        feed.append(ev(n));
    }
    let r = runner(&repo, &feed);
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    r.progress().wait_for(3, None).await.unwrap();
    assert!(locks.simulate_loss("projection:seen"));
    let err = task.await.unwrap().unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    // Said once: which lock, then what the runner did about it.
    assert_eq!(
        err.to_string(),
        "lock \"projection:seen\" was lost: the runner of projection \"seen\" stopped"
    );
    for n in 4..=5 {
        feed.append(ev(n));
    }
    let next = runner(&repo, &feed);
    let task = tokio::spawn({
        let (r, l, s) = (next.clone(), locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    next.progress().wait_for(5, None).await.unwrap();
    stop.cancel();
    assert_eq!(task.await.unwrap().unwrap().applied, 2);
    assert_each_applied_once(&repo, 5).await;
}

#[tokio::test]
async fn transient_feed_failures_are_retried_and_a_lasting_one_ends_the_run() {
    use pgcoord::readmodels::EventFeed;
    use pgcoord::readmodels::RetryPolicy;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails the first `failures` reads with a lost connection.
    struct Flaky {
        inner: InMemoryFeed<Ev>,
        failures: u32,
        reads: AtomicU32,
    }
    impl EventFeed for Flaky {
        type Event = Ev;
        async fn read_after(
            &self,
            after: Option<i64>,
            limit: usize,
        ) -> pgcoord::Result<Vec<(i64, Ev)>> {
            if self.reads.fetch_add(1, Ordering::SeqCst) < self.failures {
                return Err(pgcoord::error::BackendError::new(
                    pgcoord::error::BackendErrorKind::Closed,
                    "connection reset",
                )
                .into());
            }
            self.inner.read_after(after, limit).await
        }
        fn signal(&self) -> Option<pgcoord::readmodels::FeedSignal> {
            self.inner.signal()
        }
    }
    let no_wait = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
        multiplier: 1.0,
    };
    let inner = InMemoryFeed::new();
    inner.append(ev(1));
    let repo = InMemoryReadModelRepository::new();
    let projection =
        ReadModelProjection::new(Recorder::default(), repo.clone()).with_retry(no_wait.clone());
    let flaky = Flaky {
        inner: inner.clone(),
        failures: 2,
        reads: AtomicU32::new(0),
    };
    let r = ProjectionRunner::new(projection, flaky).idle_interval(None);
    let stop = CancellationToken::new();
    let locks = InMemoryLockManager::new(None);
    let (summary, ()) = tokio::join!(r.run(&locks, &stop), async {
        r.progress().wait_for(1, None).await.unwrap();
        stop.cancel();
    });
    assert_eq!(
        summary.unwrap().applied,
        1,
        "two failed reads, then the event"
    );

    let projection = ReadModelProjection::new(Recorder::default(), repo).with_retry(no_wait);
    let lasting = Flaky {
        inner,
        failures: 3,
        reads: AtomicU32::new(0),
    };
    let err = ProjectionRunner::new(projection, lasting)
        .run(&locks, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, pgcoord::Error::Backend(b) if b.kind() == pgcoord::error::BackendErrorKind::Closed),
        "{err}"
    );
}
