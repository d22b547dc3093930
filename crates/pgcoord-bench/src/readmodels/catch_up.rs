//! Projection catch-up speed: a `Tally` read model fed `(id, amount)`
//! events through a checkpointed `ReadModelProjection`, on any backend with
//! transactional read models; and one round of it on both backends, each
//! next to its raw baseline (`catch_up_raw`).

use std::path::Path;
use std::time::Instant;

use pgcoord::readmodels::postgres::PostgresDatabase;
use pgcoord::readmodels::sqlite::SqliteDatabase;
use pgcoord::readmodels::ReadModelProjection;
use pgcoord::readmodels::{
    ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository, TransactionalReadModels,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::catch_up_raw::{pg_catch_up_raw, sqlite_catch_up_raw};
use super::fixture::feed;
use super::rate::Round;
use crate::Res;

/// Events per transaction of the batched scenarios.
pub(super) const EVENTS_PER_BATCH: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "bench_tallies")]
pub(super) struct Tally {
    #[serde(flatten)]
    meta: ReadModelMeta,
    total: i64,
}

struct Tallies;

impl ReadModelHandler for Tallies {
    type Model = Tally;
    type Event = (Uuid, i64);

    async fn handle<R: ReadModelRepository<Tally>>(
        &self,
        e: &(Uuid, i64),
        repo: &R,
    ) -> pgcoord::Result<()> {
        let mut t = repo.get(e.0).await?.unwrap_or(Tally {
            meta: ReadModelMeta::new(e.0),
            total: 0,
        });
        t.total += e.1;
        repo.save(&t).await?;
        Ok(())
    }
}

/// Events/s of a checkpointed catch-up: one transaction per event (read
/// checkpoint, get, save, advance checkpoint, commit), or `batch` events per
/// transaction.
pub(super) async fn catch_up_rate<B>(backend: B, events: usize, batch: Option<usize>) -> Res<f64>
where
    B: TransactionalReadModels<Tally>,
{
    let feed = feed(events);
    let p = ReadModelProjection::new(Tallies, backend).named(format!("bench-{}", Uuid::new_v4()));
    let start = Instant::now();
    let pairs = feed.iter().map(|(pos, e)| (*pos, e));
    let done = match batch {
        None => p.catch_up(pairs).await?,
        Some(n) => p.catch_up_batched(pairs, n).await?,
    };
    let rate = done.applied as f64 / start.elapsed().as_secs_f64();
    p.reset().await?;
    Ok(rate)
}

/// One round of catch-up on both backends: one transaction per event
/// (`single` events) and [`EVENTS_PER_BATCH`] per transaction (`batched`
/// events), each followed by its raw baseline (the `_raw` rows).
pub(super) async fn catch_up_round(
    url: &str,
    dir: &Path,
    round: usize,
    single: usize,
    batched: usize,
) -> Res<Round> {
    let pg = PostgresDatabase::connect(url).await?;
    pg.create_schema::<Tally>().await?;
    let path = dir.join(format!("tally-{round}.db"));
    let lite = SqliteDatabase::open(&path).await?;
    lite.create_schema::<Tally>().await?;
    let pg_repo = pg.repository::<Tally>();
    let lite_repo = lite.repository::<Tally>();
    let b = EVENTS_PER_BATCH;
    let mut out = Round::new();
    out.push((
        "pg_catch_up",
        catch_up_rate(pg_repo.clone(), single, None).await?,
    ));
    out.push(("pg_catch_up_raw", pg_catch_up_raw(url, single, 1).await?));
    out.push((
        "pg_catch_up_batched100",
        catch_up_rate(pg_repo, batched, Some(b)).await?,
    ));
    out.push((
        "pg_catch_up_batched100_raw",
        pg_catch_up_raw(url, batched, b).await?,
    ));
    // Untimed: a fresh file's first commits also grow its WAL, which made
    // whichever side went first (ours) pay for that; after this pass both
    // write into WAL space that already exists.
    lite_repo.prepare_checkpoints().await?;
    sqlite_catch_up_raw(&path, single, 1)?;
    out.push((
        "sqlite_catch_up",
        catch_up_rate(lite_repo.clone(), single, None).await?,
    ));
    out.push((
        "sqlite_catch_up_raw",
        sqlite_catch_up_raw(&path, single, 1)?,
    ));
    out.push((
        "sqlite_catch_up_batched100",
        catch_up_rate(lite_repo, batched, Some(b)).await?,
    ));
    out.push((
        "sqlite_catch_up_batched100_raw",
        sqlite_catch_up_raw(&path, batched, b)?,
    ));
    pg.close();
    Ok(out)
}
