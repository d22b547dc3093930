//! The scenario registry: names, order, what runs each, which pairs are
//! compared, and which scenarios a server cannot run.

use crate::ctx::{Ctx, RunOut, ScenarioReport};
use crate::{abandoned, contention, ours, ours_load, raw, Res};

/// Throughput scenarios, run for a fixed time each, interleaved over rounds.
/// Ordered so that the scenarios compared in a ratio run next to each other:
/// load from elsewhere on the machine then hits both alike.
pub const THROUGHPUT: [&str; 17] = [
    "raw_seq",
    "raw_seq_inline",
    "ours_seq",
    "sqlx_seq",
    "ours_try_seq",
    "raw_seq_actor",
    "raw_seq_actor_inline",
    "raw_pipelined64",
    "ours_conc64",
    "held10k",
    "sqlx_pool64",
    "ours_conc1024",
    "raw_batched",
    "abandoned_alone",
    "abandoned",
    "contention",
    "contention_sqlx",
];

/// Latency / correctness scenarios on the lock manager, run once after the throughput rounds.
pub const OTHERS: [&str; 4] = ["handoff", "fifo", "fifo_one_manager", "capacity"];

/// Ratios of ops/s reported (numerator, denominator); the first ones carry targets.
pub const RATIOS: [(&str, &str); 12] = [
    ("ours_seq", "sqlx_seq"),
    ("ours_seq", "raw_seq_inline"),
    ("ours_conc64", "raw_pipelined64"),
    ("ours_conc1024", "raw_batched"),
    ("held10k", "ours_conc64"),
    ("abandoned", "abandoned_alone"),
    ("contention", "contention_sqlx"),
    // Informative.
    ("ours_seq", "raw_seq"),
    ("ours_conc64", "sqlx_pool64"),
    ("ours_seq", "raw_seq_actor"),
    ("raw_seq_actor_inline", "raw_seq_actor"),
    ("ours_conc64", "raw_batched"),
];

/// Why `name` cannot run against this server, if it cannot.
pub fn skip_reason(name: &str, ctx: &Ctx) -> Option<String> {
    match name {
        "held10k" | "capacity" => ctx.lock_table_short.clone(),
        _ => None,
    }
}

pub async fn run_throughput(name: &str, ctx: &Ctx, round: usize) -> Res<RunOut> {
    match name {
        "raw_seq" => raw::raw_seq(ctx, round).await,
        "raw_seq_inline" => raw::raw_seq_inline(ctx, round).await,
        "raw_seq_actor" => raw::raw_seq_actor(ctx, round, false).await,
        "raw_seq_actor_inline" => raw::raw_seq_actor(ctx, round, true).await,
        "raw_pipelined64" => raw::raw_pipelined64(ctx, round).await,
        "raw_batched" => raw::raw_batched(ctx, round).await,
        "sqlx_seq" => raw::sqlx_seq(ctx, round).await,
        "sqlx_pool64" => raw::sqlx_pool64(ctx, round).await,
        "ours_seq" => ours::ours_seq(ctx, round).await,
        "ours_try_seq" => ours::ours_try_seq(ctx, round).await,
        "ours_conc64" => ours_load::ours_conc(ctx, round, 64, 0).await,
        "ours_conc1024" => ours_load::ours_conc(ctx, round, 1024, 0).await,
        "held10k" => ours_load::ours_conc(ctx, round, 64, crate::ctx::HELD_LOCKS).await,
        "abandoned_alone" => abandoned::abandoned(ctx, round, false).await,
        "abandoned" => abandoned::abandoned(ctx, round, true).await,
        "contention" => contention::contention(ctx, round, contention::Impl::Ours).await,
        "contention_sqlx" => contention::contention(ctx, round, contention::Impl::Sqlx).await,
        other => Err(format!("unknown scenario {other}").into()),
    }
}

pub async fn run_other(name: &str, ctx: &Ctx) -> Res<ScenarioReport> {
    match name {
        "handoff" => ours::handoff(ctx).await,
        "fifo" => ours::fifo(ctx, false).await,
        "fifo_one_manager" => ours::fifo(ctx, true).await,
        "capacity" => ours::capacity(ctx).await,
        other => Err(format!("unknown scenario {other}").into()),
    }
}
