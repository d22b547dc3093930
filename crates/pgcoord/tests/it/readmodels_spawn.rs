//! The projection's calls are `Send` futures on every backend: a task
//! spawned with `catch_up`, `catch_up_batched`, `handle_at`,
//! `apply_batch`, `run` or `checkpoint` on an `Arc` of a projection
//! compiles and runs (on the
//! PostgreSQL backend these once failed to compile: "implementation of
//! `PgClientSource` is not general enough").

use std::sync::Arc;

use pgcoord::readmodels::{
    ReadModel, ReadModelHandler, ReadModelMeta, ReadModelProjection, ReadModelRepository,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "spawned_tallies")]
struct Tally {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    n: i64,
}

#[derive(Clone)]
struct Inc;

struct Count;

impl ReadModelHandler for Count {
    type Model = Tally;
    type Event = Inc;

    async fn handle<R: ReadModelRepository<Tally>>(
        &self,
        _event: &Inc,
        repo: &R,
    ) -> pgcoord::Result<()> {
        let id = pgcoord::uuid::Uuid::from_u64_pair(0, 1);
        let mut t = repo.get(id).await?.unwrap_or(Tally {
            meta: ReadModelMeta::new(id),
            n: 0,
        });
        t.n += 1;
        repo.save(&t).await.map(|_| ())
    }
}

/// Runs every call of the projection `p` in a spawned task; the tally
/// counts the events applied. A macro, not a generic function: the spawns
/// must see the backend's concrete type (in a generic function the
/// compiler takes the port's `Send` bounds instead, and the spawns would
/// compile whatever the backend's futures are).
macro_rules! spawned_calls {
    ($p:expr) => {{
        let p = $p;
        let q = p.clone();
        let caught = tokio::spawn(async move { q.catch_up(vec![(1i64, Inc), (2, Inc)]).await });
        assert_eq!(caught.await.unwrap().unwrap().applied, 2);
        let q = p.clone();
        let batched =
            tokio::spawn(async move { q.catch_up_batched(vec![(3i64, Inc), (4, Inc)], 2).await });
        assert_eq!(batched.await.unwrap().unwrap().applied, 2);
        let q = p.clone();
        let one = tokio::spawn(async move { q.handle_at(5, &Inc).await });
        one.await.unwrap().unwrap();
        let q = p.clone();
        let batch = tokio::spawn(async move { q.apply_batch(&[(6, &Inc)]).await });
        assert_eq!(batch.await.unwrap().unwrap().applied, 1);
        let q = p.clone();
        let locks = pgcoord::InMemoryLockManager::new(None);
        let run = tokio::spawn(async move { q.run(&locks, None, vec![(7i64, Inc)]).await });
        assert_eq!(run.await.unwrap().unwrap().applied, 1);
        let q = p.clone();
        let checkpoint = tokio::spawn(async move { q.checkpoint().await });
        assert_eq!(checkpoint.await.unwrap().unwrap(), Some(7));
        let id = pgcoord::uuid::Uuid::from_u64_pair(0, 1);
        p.backend().get(id).await.unwrap().unwrap().n
    }};
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_calls_spawn_on_sqlite_through_the_connection_factory() {
    let db = pgcoord::readmodels::connect("sqlite://").await.unwrap();
    db.create_schema::<Tally>().await.unwrap();
    let p = Arc::new(ReadModelProjection::new(Count, db.repository::<Tally>()));
    assert_eq!(spawned_calls!(p), 7);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_calls_spawn_on_postgres() {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
    let db = PostgresDatabase::connect(&test_db.url()).await.unwrap();
    db.create_schema::<Tally>().await.unwrap();
    let p = Arc::new(ReadModelProjection::new(Count, db.repository::<Tally>()));
    assert_eq!(spawned_calls!(p), 7);
}
