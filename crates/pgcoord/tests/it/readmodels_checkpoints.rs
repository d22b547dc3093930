//! Checkpointed projections on the in-memory, SQLite and PostgreSQL
//! backends: replays skip what was applied; a run dropped at every poll (a
//! crash between any two statements, as far as the database can tell) or
//! failed at any event, then run again, ends exactly where a clean run ends;
//! poison events stop with their position after jittered backoff; reset
//! empties model and checkpoint together; one runner per projection.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::Poll;
use std::time::Duration;

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{
    Applied, Query, ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository,
    TransactionalReadModels,
};
use pgcoord::readmodels::{CatchUp, ReadModelProjection, RetryPolicy};
use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Error, InMemoryLockManager, Result,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ReadModel)]
struct Tally {
    #[serde(flatten)]
    meta: ReadModelMeta,
    /// The sum of the amounts: an event applied twice shows here.
    total: i64,
    /// How many events touched the row.
    events: i64,
}

#[derive(Clone)]
struct Add {
    tally: Uuid,
    amount: i64,
}

/// Adds each event's amount, in two statements (get, save). Fails at the
/// position stored in `fail_at` (once, then clears it), transiently or not.
struct Tallies {
    fail_at: AtomicI64,
    transient: bool,
}

impl Tallies {
    fn new() -> Self {
        Self {
            fail_at: AtomicI64::new(-1),
            transient: false,
        }
    }
}

impl ReadModelHandler for Tallies {
    type Model = Tally;
    type Event = (i64, Add);

    async fn handle<R: ReadModelRepository<Tally>>(
        &self,
        event: &(i64, Add),
        repo: &R,
    ) -> Result<()> {
        let (position, add) = event;
        let mut t = repo.get(add.tally).await?.unwrap_or(Tally {
            meta: ReadModelMeta::new(add.tally),
            total: 0,
            events: 0,
        });
        t.total += add.amount;
        t.events += 1;
        repo.save(&t).await?;
        if self
            .fail_at
            .compare_exchange(*position, -1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let kind = if self.transient {
                BackendErrorKind::Closed
            } else {
                BackendErrorKind::Other
            };
            return Err(BackendError::new(kind, "injected failure").into());
        }
        Ok(())
    }
}

fn feed() -> Vec<(i64, (i64, Add))> {
    let ids = [Uuid::new_v4(), Uuid::new_v4()];
    (1..=6)
        .map(|p| {
            let add = Add {
                tally: ids[(p % 2) as usize],
                amount: p * 10,
            };
            (p, (p, add))
        })
        .collect()
}

/// What a projection's read model holds, comparable across runs.
async fn state<R: ReadModelRepository<Tally>>(repo: &R) -> Vec<(Uuid, i64, i64)> {
    let mut rows: Vec<(Uuid, i64, i64)> = repo
        .find(&Query::new())
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.meta.id, t.total, t.events))
        .collect();
    rows.sort();
    rows
}

/// Polls `fut` until it is ready or has returned `Pending` `n` times, then
/// drops it. `None` when it was dropped.
async fn drop_after_polls<F: Future>(fut: F, n: usize) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut pendings = 0;
    std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending if pendings + 1 >= n => Poll::Ready(None),
        Poll::Pending => {
            pendings += 1;
            Poll::Pending
        }
    })
    .await
}

/// The behaviour every backend must show; `fresh` makes an empty backend
/// (model table and checkpoint table ready).
async fn checkpoint_suite<B, F, Fut>(fresh: F)
where
    B: TransactionalReadModels<Tally> + ReadModelRepository<Tally>,
    F: Fn() -> Fut,
    Fut: Future<Output = B>,
{
    let events = feed();

    // A clean run, then a replay that skips everything.
    let clean = fresh().await;
    let p = ReadModelProjection::new(Tallies::new(), clean).named("tallies");
    let first = p
        .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
        .await
        .unwrap();
    assert_eq!(
        first,
        CatchUp {
            applied: 6,
            skipped: 0
        }
    );
    let again = p
        .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
        .await
        .unwrap();
    assert_eq!(
        again,
        CatchUp {
            applied: 0,
            skipped: 6
        }
    );
    assert_eq!(p.checkpoint().await.unwrap(), Some(6));
    let expected = state(p.backend()).await;
    assert_eq!(expected.iter().map(|r| r.2).sum::<i64>(), 6);
    assert_eq!(expected.iter().map(|r| r.1).sum::<i64>(), 210);

    // Dropped after every possible number of polls, then run to the end:
    // the same state as the clean run.
    let mut n = 1;
    loop {
        let backend = fresh().await;
        let p = ReadModelProjection::new(Tallies::new(), backend).named("tallies");
        let finished = drop_after_polls(p.catch_up(events.iter().map(|(pos, e)| (*pos, e))), n)
            .await
            .is_some();
        let rest = p
            .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
            .await
            .unwrap();
        assert_eq!(rest.applied + rest.skipped, 6, "after {n} polls");
        assert_eq!(
            state(p.backend()).await,
            expected,
            "dropped after {n} polls"
        );
        assert_eq!(p.checkpoint().await.unwrap(), Some(6), "after {n} polls");
        if finished {
            break;
        }
        n += 1;
        assert!(n < 10_000, "the run never finished");
    }

    // A failure at each event, then a rerun: the same state again.
    for fail in 1..=6 {
        let backend = fresh().await;
        let handler = Tallies::new();
        handler.fail_at.store(fail, Ordering::SeqCst);
        let p = ReadModelProjection::new(handler, backend)
            .named("tallies")
            .with_retry(RetryPolicy::none());
        let err = p
            .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
            .await
            .unwrap_err();
        let rm = err.as_read_model().expect("a read-model error");
        assert_eq!(rm.failed_position(), Some(fail), "{err}");
        assert_eq!(
            p.checkpoint().await.unwrap(),
            (fail > 1).then_some(fail - 1)
        );
        p.catch_up(events.iter().map(|(pos, e)| (*pos, e)))
            .await
            .unwrap();
        assert_eq!(state(p.backend()).await, expected, "failure at {fail}");
    }

    // Batched: several events per transaction, the same end state; a failure
    // inside a batch is replayed event by event and reported with its
    // position.
    for batch in [1, 4, 100] {
        let p = ReadModelProjection::new(Tallies::new(), fresh().await).named("tallies");
        let done = p
            .catch_up_batched(events.iter().map(|(pos, e)| (*pos, e)), batch)
            .await
            .unwrap();
        assert_eq!(
            done,
            CatchUp {
                applied: 6,
                skipped: 0
            },
            "batch {batch}"
        );
        assert_eq!(state(p.backend()).await, expected, "batch {batch}");
        let again = p
            .catch_up_batched(events.iter().map(|(pos, e)| (*pos, e)), batch)
            .await
            .unwrap();
        assert_eq!(again.skipped, 6, "batch {batch}");
    }
    for fail in 1..=6 {
        let handler = Tallies::new();
        handler.fail_at.store(fail, Ordering::SeqCst);
        let p = ReadModelProjection::new(handler, fresh().await)
            .named("tallies")
            .with_retry(RetryPolicy::none());
        // The batch fails (the handler fails once, at `fail`); replayed one
        // by one, every event applies.
        let done = p
            .catch_up_batched(events.iter().map(|(pos, e)| (*pos, e)), 4)
            .await
            .unwrap();
        assert_eq!(done.applied, 6, "failure at {fail}");
        assert_eq!(
            state(p.backend()).await,
            expected,
            "batched, failure at {fail}"
        );
    }
    let mut n = 1;
    loop {
        let p = ReadModelProjection::new(Tallies::new(), fresh().await).named("tallies");
        let finished = drop_after_polls(
            p.catch_up_batched(events.iter().map(|(pos, e)| (*pos, e)), 4),
            n,
        )
        .await
        .is_some();
        p.catch_up_batched(events.iter().map(|(pos, e)| (*pos, e)), 4)
            .await
            .unwrap();
        assert_eq!(
            state(p.backend()).await,
            expected,
            "batched, dropped after {n} polls"
        );
        if finished {
            break;
        }
        n += 1;
    }

    // Reset: model and checkpoint go together; a rebuild re-applies all.
    let backend = fresh().await;
    let p = ReadModelProjection::new(Tallies::new(), backend).named("tallies");
    p.catch_up(events.iter().map(|(pos, e)| (*pos, e)))
        .await
        .unwrap();
    assert_eq!(p.reset().await.unwrap(), 2);
    assert_eq!(p.checkpoint().await.unwrap(), None);
    assert!(state(p.backend()).await.is_empty());
    let rebuilt = p
        .catch_up(events.iter().map(|(pos, e)| (*pos, e)))
        .await
        .unwrap();
    assert_eq!(rebuilt.applied, 6);
    assert_eq!(state(p.backend()).await, expected);

    // Reset dropped at every poll: rows and checkpoint went together or
    // not at all.
    let mut n = 1;
    loop {
        let p = ReadModelProjection::new(Tallies::new(), fresh().await).named("tallies");
        p.catch_up(events.iter().map(|(pos, e)| (*pos, e)))
            .await
            .unwrap();
        let finished = drop_after_polls(p.reset(), n).await.is_some();
        let rows = p
            .backend()
            .count(&Query::new().include_deleted(true))
            .await
            .unwrap();
        let checkpoint = p.checkpoint().await.unwrap();
        assert!(
            (rows == 0 && checkpoint.is_none()) || (rows == 2 && checkpoint == Some(6)),
            "reset dropped after {n} polls left {rows} rows and checkpoint {checkpoint:?}"
        );
        if finished {
            break;
        }
        n += 1;
    }

    // Checkpoints are per projection name.
    let other = ReadModelProjection::new(Tallies::new(), fresh().await).named("other");
    assert_eq!(other.checkpoint().await.unwrap(), None);
    assert_eq!(
        other.handle_at(3, &events[2].1).await.unwrap(),
        Applied::Applied
    );
    assert_eq!(
        other.handle_at(3, &events[2].1).await.unwrap(),
        Applied::Skipped
    );
    assert_eq!(
        other.handle_at(2, &events[1].1).await.unwrap(),
        Applied::Skipped
    );
}

#[tokio::test]
async fn in_memory_checkpoints() {
    checkpoint_suite(|| async { InMemoryReadModelRepository::<Tally>::new() }).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_checkpoints() {
    use pgcoord::readmodels::sqlite::SqliteDatabase;
    checkpoint_suite(|| async {
        let db = SqliteDatabase::open_in_memory().await.unwrap();
        db.create_schema::<Tally>().await.unwrap();
        db.repository::<Tally>()
    })
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_checkpoints() {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    use pgcoord::ConnectOptions;
    use pgcoord_testkit::pg::TestDatabase;
    // One database, and a schema of its own for each fresh backend (the
    // suite asks for a hundred or so: a schema is much cheaper than a
    // database, and an earlier run's pooled sessions never see it).
    let db = TestDatabase::create().await.unwrap();
    let admin = db.connect().await.unwrap();
    let runs = std::sync::atomic::AtomicUsize::new(0);
    checkpoint_suite(|| async {
        let schema = format!("run_{}", runs.fetch_add(1, Ordering::Relaxed));
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let mut config = db.config();
        config.options(format!("-c search_path={schema}"));
        let pool = PostgresDatabase::builder(ConnectOptions::from(config))
            .build()
            .unwrap();
        pool.create_schema::<Tally>().await.unwrap();
        let repo = pool.repository::<Tally>();
        // The tables are where the backend looks, not in `public`.
        let found: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = $1",
                &[&schema],
            )
            .await
            .unwrap()
            .get(0);
        assert!(found > 0, "no table in {schema}");
        repo
    })
    .await;
}

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
