//! Cancel safety of the read-model projection and the SQLite gate: a
//! projection future dropped mid-event leaves nothing of the event behind
//! and the backend usable; a SQLite transaction makes other calls wait.
// Some imports serve only the cases of one backend feature.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(unused_imports)
)]

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::Poll;

use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::ReadModelProjection;
use pgcoord::readmodels::{Query, ReadModelHandler, ReadModelRepository, TransactionalReadModels};
use pgcoord::Result;
use pgcoord_testkit::readmodels::ConformanceItem;
use tokio::sync::oneshot;

enum Step {
    /// Saves an item, says so, then never finishes.
    SaveThenStall(&'static str),
    /// Saves an item.
    Save(&'static str),
}

#[derive(Default)]
struct Staller {
    saved: Mutex<Option<oneshot::Sender<()>>>,
}

impl ReadModelHandler for Staller {
    type Model = ConformanceItem;
    type Event = Step;

    async fn handle<R: ReadModelRepository<ConformanceItem>>(
        &self,
        event: &Step,
        repo: &R,
    ) -> Result<()> {
        match event {
            Step::Save(name) => {
                repo.save(&ConformanceItem::new(*name)).await?;
            }
            Step::SaveThenStall(name) => {
                repo.save(&ConformanceItem::new(*name)).await?;
                // Visible inside the transaction...
                assert_eq!(repo.count(&Query::new()).await?, 1);
                if let Some(tx) = self.saved.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                std::future::pending::<()>().await;
            }
        }
        Ok(())
    }
}

async fn dropped_event_leaves_nothing<B>(backend: B)
where
    B: TransactionalReadModels<ConformanceItem> + ReadModelRepository<ConformanceItem>,
{
    backend.truncate().await.unwrap();
    let (tx, rx) = oneshot::channel();
    let projection = ReadModelProjection::new(
        Staller {
            saved: Mutex::new(Some(tx)),
        },
        backend,
    );
    tokio::select! {
        _ = projection.handle(&Step::SaveThenStall("lost")) => panic!("the stalled handler finished"),
        saved = rx => saved.unwrap(),
    }
    // The handle future is dropped here, mid-transaction.
    let repo = projection.backend();
    assert_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .unwrap(),
        0
    );
    // The backend is usable: the next event commits.
    projection.handle(&Step::Save("kept")).await.unwrap();
    let names: Vec<String> = repo
        .find(&Query::new())
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["kept"]);
}

#[tokio::test]
async fn in_memory_projection_future_dropped_mid_event() {
    dropped_event_leaves_nothing(InMemoryReadModelRepository::<ConformanceItem>::new()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_projection_future_dropped_mid_event() {
    let db = pgcoord::readmodels::sqlite::SqliteDatabase::open_in_memory()
        .await
        .unwrap();
    db.create_schema::<ConformanceItem>().await.unwrap();
    dropped_event_leaves_nothing(db.repository::<ConformanceItem>()).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_projection_future_dropped_mid_event() {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    // One connection: the event after the dropped one must reuse it.
    let pool = PostgresDatabase::builder(test_db.config().into())
        .max_size(1)
        .build()
        .unwrap();
    pool.create_schema::<ConformanceItem>().await.unwrap();
    dropped_event_leaves_nothing(pool.repository::<ConformanceItem>()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_calls_wait_for_an_open_transaction() {
    let db = pgcoord::readmodels::sqlite::SqliteDatabase::open_in_memory()
        .await
        .unwrap();
    db.create_schema::<ConformanceItem>().await.unwrap();
    let repo = db.repository::<ConformanceItem>();

    let tx = db.transaction().await.unwrap();
    tx.repository::<ConformanceItem>()
        .save(&ConformanceItem::new("in tx"))
        .await
        .unwrap();
    let query = Query::new();
    let mut count = pin!(repo.count(&query));
    let first_poll = std::future::poll_fn(|cx| Poll::Ready(count.as_mut().poll(cx))).await;
    assert!(
        first_poll.is_pending(),
        "a call ran inside another caller's transaction"
    );
    tx.commit().await.unwrap();
    assert_eq!(count.await.unwrap(), 1);
}
