//! Checkpointed projections that stop: a poison event stops the
//! projection with its position after jittered backoff (at once when the
//! failure is not worth retrying), and one runner per projection, whose
//! lost or dropped lock ends the run. The handler and feed are
//! `readmodels_checkpoints`'.

use std::time::Duration;

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{
    ReadModelHandler, ReadModelProjection, ReadModelRepository, RetryPolicy,
};
use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Error, InMemoryLockManager, Result,
};

use crate::readmodels_checkpoints::{drop_after_polls, feed, Add, Tallies, Tally};

/// A handler that always fails (transiently or not) at position 3.
struct Poisoned {
    transient: bool,
}

impl ReadModelHandler for Poisoned {
    type Model = Tally;
    type Event = (i64, Add);

    async fn handle<R: ReadModelRepository<Tally>>(
        &self,
        event: &(i64, Add),
        repo: &R,
    ) -> Result<()> {
        Tallies::new().handle(event, repo).await?;
        if event.0 == 3 {
            let kind = if self.transient {
                BackendErrorKind::NoAnswer
            } else {
                BackendErrorKind::Other
            };
            return Err(BackendError::new(kind, "poison").into());
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_poison_event_stops_the_projection_with_its_position_after_backoff() {
    let events = feed();
    let retry = RetryPolicy {
        max_attempts: 4,
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        multiplier: 2.0,
    };
    let p = ReadModelProjection::new(
        Poisoned { transient: true },
        InMemoryReadModelRepository::<Tally>::new(),
    )
    .with_retry(retry.clone());
    let started = tokio::time::Instant::now();
    let err = p
        .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
        .await
        .unwrap_err();
    // Virtual time: the waits happened (at least half of each backoff,
    // jitter included); the projection never retried without waiting.
    let least: Duration = (1..4).map(|a| retry.backoff(a) / 2).sum();
    assert!(
        started.elapsed() >= least,
        "{:?} < {least:?}",
        started.elapsed()
    );
    match err.as_read_model() {
        Some(pgcoord::error::ReadModelError::ProjectionFailed {
            projection,
            position,
            attempts,
            cause,
        }) => {
            assert_eq!(
                (projection.as_str(), *position, *attempts),
                ("tallies", 3, 4)
            );
            assert_eq!(
                cause.as_backend().unwrap().kind(),
                BackendErrorKind::NoAnswer
            );
        }
        other => panic!("expected ProjectionFailed, got {other:?}"),
    }
    assert!(
        std::error::Error::source(&err).is_some(),
        "the cause is kept"
    );
    assert_eq!(p.checkpoint().await.unwrap(), Some(2));
    assert_eq!(
        p.backend().len(),
        2,
        "the poison event's writes rolled back"
    );

    // A failure not worth retrying stops at once.
    let p = ReadModelProjection::new(
        Poisoned { transient: false },
        InMemoryReadModelRepository::<Tally>::new(),
    )
    .with_retry(retry);
    let err = p
        .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
        .await
        .unwrap_err();
    assert!(matches!(
        err.as_read_model(),
        Some(pgcoord::error::ReadModelError::ProjectionFailed {
            attempts: 1,
            position: 3,
            ..
        })
    ));
}

#[tokio::test]
async fn one_runner_per_projection_and_a_lost_lock_stops_the_run() {
    use pgcoord::{DistributedLock, LockRegistry};
    let events = feed();
    let locks = InMemoryLockManager::new(Some("runner".into()));
    let p = ReadModelProjection::new(Tallies::new(), InMemoryReadModelRepository::<Tally>::new());
    assert_eq!(p.lock_key(), "projection:tallies");

    // Another runner holds the projection: this one cannot start.
    let other = locks.acquire(&p.lock_key(), None).await.unwrap();
    let err = p
        .run(
            &locks,
            Some(Duration::ZERO),
            events.iter().map(|(pos, e)| (*pos, e)),
        )
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(p.checkpoint().await.unwrap(), None);
    other.release().await.unwrap();

    // Alone, it runs and gives the lock back.
    let done = p
        .run(
            &locks,
            None,
            events.iter().take(3).map(|(pos, e)| (*pos, e)),
        )
        .await
        .unwrap();
    assert_eq!(done.applied, 3);
    assert_eq!(locks.held_lock_count(), 0);

    // The lock is lost before the next event: the run stops, typed.
    struct LoseAt<'a> {
        locks: &'a InMemoryLockManager,
        key: String,
    }
    let lose = LoseAt {
        locks: &locks,
        key: p.lock_key(),
    };
    let feed_then_lose = events.iter().skip(3).enumerate().map(|(i, (pos, e))| {
        if i == 1 {
            assert!(lose.locks.simulate_loss(&lose.key));
        }
        (*pos, e)
    });
    let err = p.run(&locks, None, feed_then_lose).await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert_eq!(err.key(), Some("projection:tallies"));
    assert_eq!(
        p.checkpoint().await.unwrap(),
        Some(4),
        "stopped before event 5"
    );
    let _: &Error = &err;

    // A run dropped mid-way gives its lock back.
    let running = p.run(&locks, None, events.iter().map(|(pos, e)| (*pos, e)));
    let _ = drop_after_polls(running, 1).await;
    pgcoord_testkit::locks::eventually(
        "the dropped run's lock is released",
        Duration::from_secs(10),
        || locks.held_lock_count() == 0,
    )
    .await;
}
