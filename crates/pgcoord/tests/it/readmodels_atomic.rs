//! `save_many` is all or nothing on every backend: a constraint violation
//! in the last element leaves no row of the batch, whether the batch is one
//! statement, several (an id named twice, more rows than one statement
//! takes) or runs inside a caller's transaction. And the pool's failures
//! are typed: a closed pool is `Closed`, an exhausted one a `Timeout`.

use pgcoord::error::BackendErrorKind;
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord_testkit::readmodels::ConformanceItem as Item;

/// `[A qty=1, B qty=1, A qty=-5]`: the repeat of A forces a second
/// statement on PostgreSQL, and its quantity breaks the CHECK.
fn repeated_id_batch() -> Vec<Item> {
    let a = Item::new("a").quantity(1);
    let b = Item::new("b").quantity(1);
    let mut again = a.clone();
    again.quantity = -5;
    vec![a, b, again]
}

/// More rows than one PostgreSQL statement's parameter limit allows, the
/// last one breaking the CHECK.
fn oversized_batch() -> Vec<Item> {
    let mut batch: Vec<Item> = (0..6_000)
        .map(|i| Item::new(format!("n{i}")).quantity(1))
        .collect();
    batch.last_mut().unwrap().quantity = -1;
    batch
}

async fn nothing_stays<R: ReadModelRepository<Item>>(repo: &R, batch: &[Item], what: &str) {
    let err = repo.save_many(batch).await.unwrap_err();
    let backend = err
        .as_backend()
        .unwrap_or_else(|| panic!("{what}: not a backend error: {err:?}"));
    assert_eq!(backend.kind(), BackendErrorKind::Query, "{what}: {err:?}");
    assert_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .unwrap(),
        0,
        "{what}: part of a failed batch was committed"
    );
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use pgcoord::{
        readmodels::postgres::{PostgresDatabase, PostgresReadModelRepository},
        ConnectOptions,
    };
    use pgcoord_testkit::pg::TestDatabase;
    use std::future::Future;
    use std::time::Duration;

    async fn pool(db: &TestDatabase) -> PostgresDatabase {
        let pool = PostgresDatabase::connect(&db.url()).await.unwrap();
        pool.create_schema::<Item>().await.unwrap();
        pool.get()
            .await
            .unwrap()
            .batch_execute(
                "ALTER TABLE conformance_items ADD CONSTRAINT qty_not_negative CHECK (quantity >= 0)",
            )
            .await
            .unwrap();
        pool
    }

    #[tokio::test]
    async fn save_many_on_the_pool_is_all_or_nothing() {
        let db = TestDatabase::create().await.unwrap();
        let pool = pool(&db).await;
        let repo = pool.repository::<Item>();
        nothing_stays(&repo, &repeated_id_batch(), "repeated id").await;
        nothing_stays(&repo, &oversized_batch(), "oversized").await;
        // A batch that fits stores everything.
        let ok = repo.save_many(&repeated_id_batch()[..2]).await.unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(repo.count(&Query::new()).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn save_many_on_a_mutex_client_is_all_or_nothing() {
        let db = TestDatabase::create().await.unwrap();
        pool(&db).await;
        let repo = PostgresReadModelRepository::<Item, _>::new(tokio::sync::Mutex::new(
            db.connect().await.unwrap(),
        ));
        nothing_stays(&repo, &repeated_id_batch(), "repeated id").await;
    }

    #[tokio::test]
    async fn save_many_in_a_caller_transaction_cannot_commit_half() {
        let db = TestDatabase::create().await.unwrap();
        let pool = pool(&db).await;
        let mut client = db.connect().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let repo = PostgresReadModelRepository::<Item, _>::new(&tx);
        assert!(repo.save_many(&repeated_id_batch()).await.is_err());
        // The failed statement aborted the caller's transaction: its commit
        // does not make the first statement's rows durable.
        let _ = tx.commit().await;
        assert_eq!(
            pool.repository::<Item>()
                .count(&Query::new())
                .await
                .unwrap(),
            0
        );
    }

    #[tokio::test]
    async fn a_closed_pool_and_an_exhausted_pool_are_typed_errors() {
        let db = TestDatabase::create().await.unwrap();
        let pool = PostgresDatabase::builder(ConnectOptions::parse(&db.url()).unwrap())
            .max_size(1)
            .wait_timeout(Duration::from_millis(50))
            .build()
            .unwrap();
        let held = pool.get().await.unwrap();
        // A wait dropped before a connection came free leaks nothing.
        {
            let mut waiting = std::pin::pin!(pool.get());
            let polled = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(waiting.as_mut().poll(cx).is_pending())
            })
            .await;
            assert!(polled, "a second connection was lent from a pool of one");
        }
        let err = pool.get().await.unwrap_err();
        assert_eq!(
            err.as_backend().unwrap().kind(),
            BackendErrorKind::NoAnswer,
            "{err}"
        );
        drop(held);
        assert!(
            pool.get().await.is_ok(),
            "a given-back connection is lent again"
        );
        pool.close();
        let err = pool.get().await.unwrap_err();
        assert_eq!(
            err.as_backend().unwrap().kind(),
            BackendErrorKind::Closed,
            "{err}"
        );
        assert!(
            PostgresDatabase::builder(ConnectOptions::parse(&db.url()).unwrap())
                .max_size(0)
                .build()
                .is_err()
        );
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use pgcoord::readmodels::sqlite::SqliteDatabase;

    async fn db() -> SqliteDatabase {
        let db = SqliteDatabase::open_in_memory().await.unwrap();
        db.create_schema::<Item>().await.unwrap();
        // SQLite cannot add a CHECK to a table: triggers refuse the same rows.
        db.execute_batch(
            "CREATE TRIGGER qty_ins BEFORE INSERT ON conformance_items WHEN NEW.quantity < 0 \
               BEGIN SELECT RAISE(ABORT, 'quantity < 0'); END; \
             CREATE TRIGGER qty_upd BEFORE UPDATE ON conformance_items WHEN NEW.quantity < 0 \
               BEGIN SELECT RAISE(ABORT, 'quantity < 0'); END;",
        )
        .await
        .unwrap();
        db
    }

    #[tokio::test]
    async fn save_many_on_sqlite_is_all_or_nothing() {
        let db = db().await;
        let repo = db.repository::<Item>();
        nothing_stays(&repo, &repeated_id_batch(), "repeated id").await;
        nothing_stays(&repo, &oversized_batch(), "oversized").await;
    }

    #[tokio::test]
    async fn save_many_in_a_sqlite_transaction_is_all_or_nothing() {
        let db = db().await;
        let tx = db.transaction().await.unwrap();
        assert!(tx
            .repository::<Item>()
            .save_many(&repeated_id_batch())
            .await
            .is_err());
        tx.rollback().await.unwrap();
        assert_eq!(
            db.repository::<Item>().count(&Query::new()).await.unwrap(),
            0
        );
    }
}

#[tokio::test]
async fn save_many_in_memory_is_all_or_nothing() {
    use pgcoord::readmodels::InMemoryReadModelRepository;
    let repo = InMemoryReadModelRepository::<Item>::new();
    let mut batch = repeated_id_batch();
    batch.last_mut().unwrap().meta.version = 0; // refused by the contract
    assert!(repo.save_many(&batch).await.is_err());
    assert_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .unwrap(),
        0
    );
}
