//! Projection catch-up speed: a `Tally` read model fed `(id, amount)`
//! events through a checkpointed `ReadModelProjection`, on any backend with
//! transactional read models.

use std::time::Instant;

use pgcoord::adapters::sql::ReadModelProjection;
use pgcoord::ports::readmodels::{
    ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository, TransactionalReadModels,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Res;

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
    let ids: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
    let feed: Vec<(i64, (Uuid, i64))> = (0..events)
        .map(|i| ((i + 1) as i64, (ids[i % 100], 1)))
        .collect();
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
