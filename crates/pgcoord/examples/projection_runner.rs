//! A projection runner tailing a PostgreSQL event table, with a writer
//! appending events meanwhile; prints the events/s it applied and the
//! read-your-writes delay of one last event.
//!
//! `cargo run -p pgcoord --example projection_runner -- postgres://USER@HOST/DB [EVENTS]`
//! (creates the tables `example_events` and `example_totals` there).

use std::time::{Duration, Instant};

use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::readmodels::{ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository};
use pgcoord::tokio_util::sync::CancellationToken;
use pgcoord::uuid::Uuid;
use pgcoord::{
    readmodels::postgres::{PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "example_totals")]
struct Total {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    cents: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Paid {
    account: u64,
    cents: i64,
}

struct Totals;

impl ReadModelHandler for Totals {
    type Model = Total;
    type Event = Paid;

    async fn handle<R: ReadModelRepository<Total>>(
        &self,
        e: &Paid,
        repo: &R,
    ) -> pgcoord::Result<()> {
        let id = Uuid::from_u64_pair(0, e.account);
        let mut t = repo.get(id).await?.unwrap_or(Total {
            meta: ReadModelMeta::new(id),
            cents: 0,
        });
        t.cents += e.cents;
        repo.save(&t).await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> pgcoord::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("a postgres:// URL");
    let events: i64 = args
        .next()
        .map_or(5_000, |n| n.parse().expect("a number of events"));
    let db = PostgresDatabase::connect(&url).await?;
    let feed = PostgresEventTable::<Paid>::new(db.clone(), "example_events")?.listen();
    feed.create_table().await?;
    db.create_schema::<Total>().await?;
    let locks = PostgresLockManager::builder(url.parse()?).build()?;
    let projection =
        ReadModelProjection::new(Totals, db.repository::<Total>()).named("example_totals");
    let runner = ProjectionRunner::new(projection, feed.clone()).batch_size(200);
    let progress = runner.progress();
    let shutdown = CancellationToken::new();

    let writer = async {
        let start = Instant::now();
        let mut last = 0;
        let chunks = (events / 100).max(1);
        let mut client = db.get().await?;
        for chunk in 0..chunks {
            // A driver error converts into `pgcoord::Error::Backend`.
            let tx = client.transaction().await?;
            for i in 0..100 {
                last = feed
                    .append(
                        &tx,
                        &Paid {
                            account: (chunk * 100 + i) as u64 % 50,
                            cents: 1,
                        },
                    )
                    .await?;
            }
            tx.commit().await?;
        }
        progress
            .wait_for(last, Some(Duration::from_secs(300)))
            .await?;
        let elapsed = start.elapsed();
        // Read-your-writes: one more event, and how long until it is applied.
        let one = Instant::now();
        let position = feed
            .append(
                &*client,
                &Paid {
                    account: 0,
                    cents: 1,
                },
            )
            .await?;
        progress
            .wait_for(position, Some(Duration::from_secs(30)))
            .await?;
        println!(
            "{} events written and applied in {:.2?} ({:.0} events/s); one more applied {:.2?} after its commit",
            chunks * 100,
            elapsed,
            (chunks * 100) as f64 / elapsed.as_secs_f64(),
            one.elapsed()
        );
        shutdown.cancel();
        Ok::<_, pgcoord::Error>(())
    };
    let (run, written) = tokio::join!(runner.run(&locks, &shutdown), writer);
    written?;
    let summary = run?;
    println!(
        "the runner applied {} events in {} batches",
        summary.applied, summary.batches
    );
    Ok(())
}
