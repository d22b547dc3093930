//! `TransactionalReadModels::checkpoint_names` on the in-memory and SQLite
//! backends (PostgreSQL: `projections::segments_count`): the names under a
//! prefix, sorted, none before any checkpoint (or table) exists.

use pgcoord::readmodels::{InMemoryReadModelRepository, ReadModelProjection};
use pgcoord::readmodels::{ReadModelRepository, TransactionalReadModels};
use uuid::Uuid;

use crate::readmodels_checkpoints::{Add, Tallies, Tally};

async fn names_suite<B>(backend: B)
where
    B: TransactionalReadModels<Tally> + ReadModelRepository<Tally> + Clone,
{
    assert!(backend.checkpoint_names("p/").await.unwrap().is_empty());
    let add = (
        1,
        Add {
            tally: Uuid::from_u64_pair(1, 1),
            amount: 1,
        },
    );
    for name in [
        "p/segment-1-of-2",
        "p/segment-0-of-2",
        "p2/segment-0-of-1",
        "q",
    ] {
        let p = ReadModelProjection::new(Tallies::new(), backend.clone()).named(name);
        p.handle_at(1, &add).await.unwrap();
    }
    assert_eq!(
        backend.checkpoint_names("p/").await.unwrap(),
        ["p/segment-0-of-2", "p/segment-1-of-2"]
    );
    assert!(backend.checkpoint_names("none/").await.unwrap().is_empty());
}

#[tokio::test]
async fn in_memory_checkpoint_names() {
    names_suite(InMemoryReadModelRepository::<Tally>::new()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_checkpoint_names() {
    use pgcoord::readmodels::sqlite::SqliteDatabase;
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    db.create_schema::<Tally>().await.unwrap();
    names_suite(db.repository::<Tally>()).await;
}
