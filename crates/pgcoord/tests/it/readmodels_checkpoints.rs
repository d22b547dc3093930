//! Checkpointed projections on the in-memory, SQLite and PostgreSQL
//! backends: replays skip what was applied; a run dropped at every poll (a
//! crash between any two statements, as far as the database can tell) or
//! failed at any event, then run again, ends exactly where a clean run ends;
//! reset empties model and checkpoint together. Poison events and the one
//! runner per projection: `readmodels_checkpoint_stops`.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::Poll;

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{
    Applied, Query, ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository,
    TransactionalReadModels,
};
use pgcoord::readmodels::{CatchUp, ReadModelProjection, RetryPolicy};
use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Result,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ReadModel)]
pub(crate) struct Tally {
    #[serde(flatten)]
    pub(crate) meta: ReadModelMeta,
    /// The sum of the amounts: an event applied twice shows here.
    pub(crate) total: i64,
    /// How many events touched the row.
    pub(crate) events: i64,
}

#[derive(Clone)]
pub(crate) struct Add {
    pub(crate) tally: Uuid,
    pub(crate) amount: i64,
}

/// Adds each event's amount, in two statements (get, save). Fails at the
/// position stored in `fail_at` (once, then clears it), transiently or not.
pub(crate) struct Tallies {
    fail_at: AtomicI64,
    transient: bool,
}

impl Tallies {
    pub(crate) fn new() -> Self {
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

pub(crate) fn feed() -> Vec<(i64, (i64, Add))> {
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
pub(crate) async fn drop_after_polls<F: Future>(fut: F, n: usize) -> Option<F::Output> {
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
