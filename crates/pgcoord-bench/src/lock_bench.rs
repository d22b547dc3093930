//! `lock_bench`: the workloads of `eventsource lock bench`
//! (`pgcoord-workloads`, the same code), on the bench's database, so the
//! figures the tool prints on a user's server can be set beside the
//! bench's own.

use pgcoord::PostgresLockManager;
use serde_json::Map;

use crate::ctx::{Ctx, ScenarioReport};
use crate::Res;

/// Runs every workload for the measuring window each.
pub async fn lock_bench(ctx: &Ctx) -> Res<ScenarioReport> {
    let client = crate::probe::connect(&ctx.options, "bench/lock_bench").await?;
    let builder = || PostgresLockManager::builder(ctx.options.clone());
    let figures = pgcoord_workloads::run_all(builder, &client, ctx.measure, |_| {}).await?;
    let extra = match serde_json::to_value(&figures)? {
        serde_json::Value::Object(map) => map,
        _ => Map::new(),
    };
    Ok(ScenarioReport {
        ops_per_sec: figures.sequential_pairs_per_sec,
        p50_us: figures.handover_p50_us,
        p99_us: figures.handover_p99_us,
        connections: 0,
        extra,
    })
}
