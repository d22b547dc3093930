//! `segments`: events/s of a projection in 1 segment with 1 runner (the
//! baseline: one `ProjectionRunner`'s worth), then split into 4 segments
//! shared by 1, 2 and 4 `SegmentedRunner`s (each with its own lock manager, in this
//! process), over a PostgreSQL event table. Each event is a read and a
//! write of a `Tally` row (100 aggregates), in batches of 50 per segment.
//! The clock runs from the runners' start until every segment's checkpoint
//! is at its last event, so it includes taking the segments (a look every
//! 100 ms).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection, Segment, SegmentedRunner};
use pgcoord::readmodels::{ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository};
use pgcoord::{
    readmodels::postgres::{PostgresCheckpointWatch, PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::ctx::{Ctx, ScenarioReport};
use crate::{cleanup, Res};

const SEGMENTS: u32 = 4;

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "bench_segment_tallies")]
struct SegTally {
    #[serde(flatten)]
    meta: ReadModelMeta,
    total: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Add {
    id: Uuid,
    amount: i64,
}

struct Tallies;

impl ReadModelHandler for Tallies {
    type Model = SegTally;
    type Event = Add;

    async fn handle<R: ReadModelRepository<SegTally>>(
        &self,
        e: &Add,
        repo: &R,
    ) -> pgcoord::Result<()> {
        let mut t = repo.get(e.id).await?.unwrap_or(SegTally {
            meta: ReadModelMeta::new(e.id),
            total: 0,
        });
        t.total += e.amount;
        repo.save(&t).await?;
        Ok(())
    }
}

fn key(e: &Add) -> String {
    e.id.to_string()
}

/// The tables the scenario (through the library) may create besides its
/// event tables: dropped at its end unless they were there before.
const SHARED_TABLES: [&str; 5] = [
    "bench_segment_tallies",
    "eventsource_projection_checkpoints",
    "eventsource_projection_progress",
    "eventsource_projection_dead_letters",
    "eventsource_projection_versions",
];

/// The projection-bookkeeping tables whose rows name the run's projections.
const BOOKKEEPING: [&str; 4] = [
    "eventsource_projection_checkpoints",
    "eventsource_projection_progress",
    "eventsource_projection_dead_letters",
    "eventsource_projection_versions",
];

/// The run's event tables (one per layout; the pid keeps two runs on one
/// database apart).
fn event_table(count: u32, runners: usize) -> String {
    format!(
        "bench_segment_events_{count}_{runners}_{}",
        std::process::id()
    )
}

const LAYOUTS: [(u32, usize); 4] = [(1, 1), (SEGMENTS, 1), (SEGMENTS, 2), (SEGMENTS, 4)];

/// Runs the layouts, then takes away what the run created, on success and
/// on failure alike: its event tables, and the read-model and projection
/// tables that were not there before (or, where they were, the rows that
/// name its projections).
pub async fn segments(ctx: &Ctx) -> Res<ScenarioReport> {
    let db = PostgresDatabase::builder(ctx.options.clone()).build()?;
    let client = db.get().await?;
    let created = cleanup::absent(&client, &SHARED_TABLES).await?;
    let mut tables: Vec<String> = LAYOUTS.iter().map(|(c, r)| event_table(*c, *r)).collect();
    let pattern = format!("bench\\_segment\\_events\\_%\\_{}%", std::process::id());
    // Registered before anything is created, so an interrupted run
    // (SIGINT, SIGTERM) takes them away too: see leftovers.rs.
    let kept: Vec<&str> = BOOKKEEPING
        .iter()
        .copied()
        .filter(|t| !created.iter().any(|c| c == t))
        .collect();
    for t in &tables {
        crate::leftovers::created(t);
    }
    for t in &kept {
        crate::leftovers::rows(t, &pattern);
    }
    let result = run_layouts(ctx, &db).await;
    tables.extend(created.iter().cloned());
    let cleaned = async {
        cleanup::drop_tables(&client, &tables).await?;
        for t in kept {
            let present: bool = client
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&t])
                .await?
                .get(0);
            if present {
                client
                    .execute(
                        &format!("DELETE FROM {t} WHERE projection LIKE $1"),
                        &[&pattern],
                    )
                    .await?;
            }
            crate::leftovers::rows_deleted(t, &pattern);
        }
        Res::Ok(())
    }
    .await;
    drop(client);
    db.close();
    let report = result?;
    cleaned.map_err(|e| {
        format!(
            "cannot drop what the scenario created: {}",
            crate::errors::describe(&*e)
        )
    })?;
    Ok(report)
}

async fn run_layouts(ctx: &Ctx, db: &PostgresDatabase) -> Res<ScenarioReport> {
    let db = db.clone();
    let events: usize = if ctx.quick { 1_000 } else { 4_000 };
    cleanup::creating("bench_segment_tallies", db.create_schema::<SegTally>()).await?;
    let ids: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
    let mut extra = Map::new();
    let mut best = 0.0f64;
    for (count, runners) in LAYOUTS {
        let table = event_table(count, runners);
        let feed = PostgresEventTable::<Add>::new(db.clone(), &table)?.listen();
        cleanup::creating(&format!("its event table {table}"), feed.create_table()).await?;
        {
            let mut client = db.get().await?;
            let tx = client.transaction().await?;
            for i in 0..events {
                feed.append(
                    &tx,
                    &Add {
                        id: ids[i % ids.len()],
                        amount: 1,
                    },
                )
                .await?;
            }
            tx.commit().await?;
        }
        let name = table.clone();
        let last: Vec<Option<i64>> = (0..count)
            .map(|i| {
                let s = Segment::new(i, count).unwrap();
                (1..=events as i64).rev().find(|p| {
                    s.holds(&key(&Add {
                        id: ids[(*p as usize - 1) % ids.len()],
                        amount: 1,
                    }))
                })
            })
            .collect();
        let watches: Vec<PostgresCheckpointWatch> = (0..count)
            .map(|i| {
                PostgresCheckpointWatch::start(
                    &db,
                    &Segment::new(i, count).unwrap().projection_name(&name),
                )
            })
            .collect();
        let stop = CancellationToken::new();
        // The runners are spawned: stopped when this future is dropped
        // (an interrupted run) as when it ends.
        let _stop_on_drop = stop.clone().drop_guard();
        let start = Instant::now();
        let mut tasks = Vec::new();
        for r in 0..runners {
            let runner = SegmentedRunner::new(&name, count, |segment| {
                let p = ReadModelProjection::new(Tallies, db.repository::<SegTally>())
                    .named(segment.projection_name(&name));
                ProjectionRunner::new(p, segment.feed(feed.clone(), key)).batch_size(50)
            })?
            .recheck(Duration::from_millis(100));
            let runner = Arc::new(runner);
            let locks = PostgresLockManager::builder(ctx.options.clone())
                .holder_id(format!("bench-segments-{runners}-{r}"))
                .build()
                .unwrap();
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move { runner.run(&locks, &stop).await }));
        }
        for (w, last) in watches.iter().zip(&last) {
            if let Some(p) = last {
                w.wait_for(*p, Some(Duration::from_secs(600))).await?;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        stop.cancel();
        let mut applied = 0;
        for t in tasks {
            applied += t.await??.applied;
        }
        if applied != events as u64 {
            return Err(format!(
                "segments: {applied} of {events} events applied with {runners} runners"
            )
            .into());
        }
        let rate = events as f64 / secs;
        best = best.max(rate);
        extra.insert(
            format!("events_per_sec_{count}_segments_{runners}_runners"),
            json!(rate.round()),
        );
        eprintln!(
            "  segments: {count} segment(s), {runners} runner(s), {events} events in {secs:.2} s: {rate:.0} events/s"
        );
    }
    extra.insert("events".into(), json!(events));
    Ok(ScenarioReport {
        ops_per_sec: best,
        p50_us: 0.0,
        p99_us: 0.0,
        connections: 0,
        extra,
    })
}
