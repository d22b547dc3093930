//! Read-model calls without a thread hop: on a multi-thread runtime a
//! SQLite call runs on the caller's thread inside `block_in_place` (so a
//! call that blocks never starves the runtime's other tasks, and what was
//! queued to the database's thread before it still runs first); a
//! projection batch on SQLite is all or nothing there too; and the
//! PostgreSQL repository's own transactions use the connection's prepared
//! statements, which survive a rollback.
// Some imports serve only the cases of one backend feature.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(unused_imports)
)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use pgcoord::readmodels::{
    Query, ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository, TransactionalReadModels,
};
use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Result,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ReadModel)]
#[read_model(table = "inline_tallies")]
struct Tally {
    #[serde(flatten)]
    meta: ReadModelMeta,
    total: i64,
}

/// Adds each event's amount (get, then save); fails permanently at the
/// position in `fail_at`, once.
struct Tallies {
    fail_at: AtomicI64,
}

impl ReadModelHandler for Tallies {
    type Model = Tally;
    type Event = (Uuid, i64);

    async fn handle<R: ReadModelRepository<Tally>>(&self, e: &(Uuid, i64), repo: &R) -> Result<()> {
        let mut t = repo.get(e.0).await?.unwrap_or(Tally {
            meta: ReadModelMeta::new(e.0),
            total: 0,
        });
        t.total += e.1;
        repo.save(&t).await?;
        if self
            .fail_at
            .compare_exchange(e.1, -1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Err(BackendError::new(BackendErrorKind::Other, "injected").into());
        }
        Ok(())
    }
}

/// Events 1..=n at positions 1..=n, amount = position, over two tallies.
fn feed(n: i64) -> Vec<(i64, (Uuid, i64))> {
    let ids = [Uuid::new_v4(), Uuid::new_v4()];
    (1..=n).map(|p| (p, (ids[(p % 2) as usize], p))).collect()
}

async fn total<R: ReadModelRepository<Tally>>(repo: &R) -> i64 {
    repo.find(&Query::new())
        .await
        .unwrap()
        .iter()
        .map(|t| t.total)
        .sum()
}

/// A batch of 25 that fails at its 7th event leaves nothing behind; the
/// same batch again applies every event once.
async fn batch_is_all_or_nothing<B>(backend: B)
where
    B: TransactionalReadModels<Tally> + ReadModelRepository<Tally>,
{
    backend.truncate().await.unwrap();
    let events = feed(25);
    let refs: Vec<(i64, &(Uuid, i64))> = events.iter().map(|(p, e)| (*p, e)).collect();
    let handler = Tallies {
        fail_at: AtomicI64::new(7),
    };
    let name = format!("inline-{}", Uuid::new_v4());
    assert!(backend
        .apply_batch_at(&name, &refs, &handler)
        .await
        .is_err());
    assert_eq!(
        backend.checkpoint(&name).await.unwrap(),
        None,
        "the failed batch moved"
    );
    assert_eq!(total(&backend).await, 0, "the failed batch left writes");
    assert_eq!(
        backend
            .apply_batch_at(&name, &refs, &handler)
            .await
            .unwrap(),
        25
    );
    assert_eq!(
        backend
            .apply_batch_at(&name, &refs, &handler)
            .await
            .unwrap(),
        0
    );
    assert_eq!(backend.checkpoint(&name).await.unwrap(), Some(25));
    assert_eq!(total(&backend).await, (1..=25).sum::<i64>());
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use pgcoord::readmodels::sqlite::SqliteDatabase;

    /// A fresh database file (WAL), removed with its directory at the end.
    struct FileDb(std::path::PathBuf);

    impl Drop for FileDb {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_dir() -> FileDb {
        let dir = std::env::temp_dir().join(format!("pgcoord-inline-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        FileDb(dir)
    }

    async fn file_db(dir: &FileDb) -> SqliteDatabase {
        let db = SqliteDatabase::open(dir.0.join("inline.db")).await.unwrap();
        db.create_schema::<Tally>().await.unwrap();
        db
    }

    /// With one runtime worker, a call that waits for another task would
    /// deadlock if it held that worker: it does not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_blocking_call_leaves_the_runtime_to_other_tasks() {
        let dir = temp_dir();
        let db = file_db(&dir).await;
        let (tx, rx) = std::sync::mpsc::channel::<&'static str>();
        let started = std::sync::Arc::new(tokio::sync::Notify::new());
        let signal = started.clone();
        let other = tokio::spawn(async move {
            signal.notified().await;
            tx.send("from another task").unwrap();
        });
        let got = db
            .call(move |_| {
                started.notify_one();
                Ok(rx.recv_timeout(Duration::from_secs(60)))
            })
            .await
            .unwrap();
        assert_eq!(got, Ok("from another task"));
        other.await.unwrap();
    }

    /// A dropped transaction queues its rollback to the database's thread;
    /// the next call, run on the caller's thread, runs after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_after_a_dropped_transaction_sees_it_rolled_back() {
        let dir = temp_dir();
        let db = file_db(&dir).await;
        let repo = db.repository::<Tally>();
        for _ in 0..20 {
            let tx = db.transaction().await.unwrap();
            tx.repository::<Tally>()
                .save(&Tally {
                    meta: ReadModelMeta::new_random(),
                    total: 1,
                })
                .await
                .unwrap();
            drop(tx);
            assert!(db.call(|c| Ok(c.is_autocommit())).await.unwrap());
            assert_eq!(repo.count(&Query::new()).await.unwrap(), 0);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_is_all_or_nothing_on_a_multi_thread_runtime() {
        let dir = temp_dir();
        let db = file_db(&dir).await;
        let repo = db.repository::<Tally>();
        repo.prepare_checkpoints().await.unwrap();
        batch_is_all_or_nothing(repo).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_call_is_an_error_on_the_callers_thread_too() {
        let dir = temp_dir();
        let db = file_db(&dir).await;
        let err = db
            .call(|_| -> Result<()> { panic!("boom inline") })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("boom inline"), "{err}");
        let repo = db.repository::<Tally>();
        assert_eq!(repo.count(&Query::new()).await.unwrap(), 0);
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use pgcoord::readmodels::postgres::{PgClientSource, PostgresDatabase};

    /// Statements prepared on the pool's one connection that touch `table`.
    async fn prepared_on(pool: &PostgresDatabase, table: &str) -> i64 {
        let client = pool.client().await.unwrap();
        client
            .query_one(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%'",
                &[&table],
            )
            .await
            .unwrap()
            .get(0)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn own_transactions_use_prepared_statements_that_survive_a_rollback() {
        let db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
        let pool = PostgresDatabase::builder(db.config().into())
            .max_size(1)
            .build()
            .unwrap();
        pool.create_schema::<Tally>().await.unwrap();
        let repo = pool.repository::<Tally>();
        repo.prepare_checkpoints().await.unwrap();
        assert_eq!(prepared_on(&pool, "inline_tallies").await, 0);

        // The first batch fails after its statements were prepared and
        // rolls back; the rest then run on those same statements, and a
        // second projection adds none.
        batch_is_all_or_nothing(repo.clone()).await;
        let model = prepared_on(&pool, "inline_tallies").await;
        let checkpoints = prepared_on(&pool, "eventsource_projection_checkpoints").await;
        assert_eq!(model, 3, "get and upsert (in transactions), find (outside)");
        assert_eq!(checkpoints, 2, "checkpoint read and advance");
        batch_is_all_or_nothing(repo).await;
        assert_eq!(prepared_on(&pool, "inline_tallies").await, model);
        assert_eq!(
            prepared_on(&pool, "eventsource_projection_checkpoints").await,
            checkpoints
        );
    }
}
