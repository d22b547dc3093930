//! The scenario registry: names, order, what runs each, which pairs are
//! compared, and which scenarios a server cannot run.

use crate::ctx::{Ctx, RunOut, ScenarioReport};
use crate::semaphore_fifo::Layout;
use crate::{
    abandoned, contention, election, fenced, holders, ours, ours_load, raw, raw_fenced,
    semaphore_fifo, Res,
};

/// Throughput scenarios, run for a fixed time each, interleaved over rounds.
/// Ordered so that the scenarios compared in a ratio run next to each other:
/// load from elsewhere on the machine then hits both alike.
pub const THROUGHPUT: [&str; 26] = [
    "raw_seq",
    "raw_seq_inline",
    "ours_seq",
    "raw_seq_fenced",
    "raw_seq_fenced_epoch",
    "ours_seq_fenced",
    "sqlx_seq",
    "ours_try_seq",
    "raw_seq_actor",
    "raw_seq_actor_inline",
    "raw_pipelined64",
    "ours_conc64",
    "raw_pipelined64_fenced",
    "raw_pipelined64_fenced_epoch",
    "ours_conc64_fenced",
    "held10k",
    "sqlx_pool64",
    "ours_conc1024",
    "raw_batched",
    "abandoned_alone",
    "abandoned",
    "contention",
    "contention_sqlx",
    "write_plain",
    "write_fenced",
    "write_fenced_pipelined",
];

/// Latency / correctness scenarios on the lock manager, run once after the throughput rounds.
pub const OTHERS: [&str; 12] = [
    "handoff",
    "lock_bench",
    "fifo",
    "fifo_one_manager",
    "capacity",
    "holders10k",
    "semaphore_fifo_one_manager",
    "semaphore_fifo_managers",
    "semaphore_fifo",
    "election_resign",
    "election_failover",
    "segments",
];

/// Scenarios that take minutes and run only when `--only` names them:
/// `failover` (promotions of private streaming standbys).
pub const ON_REQUEST: [&str; 1] = ["failover"];

/// The scenarios of the coordination primitives, selected
/// together by `--only coordination`.
pub const COORDINATION: [&str; 5] = [
    "semaphore_fifo_one_manager",
    "semaphore_fifo_managers",
    "semaphore_fifo",
    "election_resign",
    "election_failover",
];

/// The metrics-overhead scenarios (`metrics_overhead`, with `--metrics-bin`).
pub const METRICS: [&str; 6] = [
    "metrics_off_seq",
    "metrics_on_seq",
    "metrics_recorder_seq",
    "metrics_off_conc64",
    "metrics_on_conc64",
    "metrics_recorder_conc64",
];

/// Ratios of ops/s reported (numerator, denominator); the first ones carry targets.
pub const RATIOS: [(&str, &str); 24] = [
    ("ours_seq", "sqlx_seq"),
    ("ours_seq", "raw_seq_inline"),
    ("ours_conc64", "raw_pipelined64"),
    ("ours_conc1024", "raw_batched"),
    ("held10k", "ours_conc64"),
    ("abandoned", "abandoned_alone"),
    ("contention", "contention_sqlx"),
    ("ours_seq_fenced", "ours_seq"),
    ("ours_conc64_fenced", "ours_conc64"),
    ("ours_seq_fenced", "raw_seq_fenced_epoch"),
    ("ours_conc64_fenced", "raw_pipelined64_fenced_epoch"),
    ("raw_seq_fenced_epoch", "raw_seq_fenced"),
    ("raw_pipelined64_fenced_epoch", "raw_pipelined64_fenced"),
    ("write_fenced", "write_plain"),
    ("write_fenced_pipelined", "write_plain"),
    ("metrics_on_seq", "metrics_off_seq"),
    ("metrics_recorder_seq", "metrics_off_seq"),
    ("metrics_on_conc64", "metrics_off_conc64"),
    ("metrics_recorder_conc64", "metrics_off_conc64"),
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
        "held10k" | "capacity" | "holders10k" => ctx.lock_table_short.clone(),
        "failover" => crate::failover::skip_reason(ctx),
        "raw_seq_inline" | "raw_seq_actor_inline" => raw::inline_skip_reason(ctx),
        _ => None,
    }
}

/// The number after `prefix` in `name` (`ours_conc256` -> 256).
fn count_after(name: &str, prefix: &str) -> Option<usize> {
    name.strip_prefix(prefix)?.parse().ok()
}

pub async fn run_throughput(name: &str, ctx: &Ctx, round: usize) -> Res<RunOut> {
    match name {
        "raw_seq" => raw::raw_seq(ctx, round).await,
        "raw_seq_inline" => raw::raw_seq_inline(ctx, round).await,
        "raw_seq_actor" => raw::raw_seq_actor(ctx, round, false).await,
        "raw_seq_actor_inline" => raw::raw_seq_actor(ctx, round, true).await,
        "raw_batched" => raw::raw_batched(ctx, round).await,
        "sqlx_seq" => raw::sqlx_seq(ctx, round).await,
        "ours_seq" => ours::ours_seq(ctx, round).await,
        "ours_try_seq" => ours::ours_try_seq(ctx, round).await,
        "ours_seq_fenced" => fenced::ours_seq_fenced(ctx, round).await,
        "raw_seq_fenced" => raw_fenced::raw_fenced(ctx, round, 1, false).await,
        "raw_seq_fenced_epoch" => raw_fenced::raw_fenced(ctx, round, 1, true).await,
        "raw_pipelined64_fenced" => raw_fenced::raw_fenced(ctx, round, 64, false).await,
        "raw_pipelined64_fenced_epoch" => raw_fenced::raw_fenced(ctx, round, 64, true).await,
        "ours_conc64_fenced" => ours_load::ours_conc_with(ctx, round, 64, 0, true).await,
        "write_plain" => fenced::write(ctx, round, fenced::Write::Plain).await,
        "write_fenced" => fenced::write(ctx, round, fenced::Write::Checked).await,
        "write_fenced_pipelined" => fenced::write(ctx, round, fenced::Write::Pipelined).await,
        "held10k" => ours_load::ours_conc(ctx, round, 64, crate::ctx::HELD_LOCKS).await,
        "abandoned_alone" => abandoned::abandoned(ctx, round, false).await,
        "abandoned" => abandoned::abandoned(ctx, round, true).await,
        "contention" => contention::contention(ctx, round, contention::Impl::Ours).await,
        "contention_sqlx" => contention::contention(ctx, round, contention::Impl::Sqlx).await,
        // Parameterised (the sweeps use other counts): ours_conc64_held1000,
        // ours_conc{N}, raw_pipelined{N}, sqlx_pool{N}.
        other => {
            if let Some(h) = count_after(other, "ours_conc64_held") {
                ours_load::ours_conc(ctx, round, 64, h).await
            } else if let Some(n) = count_after(other, "ours_conc") {
                ours_load::ours_conc(ctx, round, n, 0).await
            } else if let Some(n) = count_after(other, "raw_pipelined") {
                raw::raw_pipelined(ctx, round, n).await
            } else if let Some(n) = count_after(other, "sqlx_pool") {
                raw::sqlx_pool(ctx, round, n).await
            } else {
                Err(format!("unknown scenario {other}").into())
            }
        }
    }
}

pub async fn run_other(name: &str, ctx: &Ctx) -> Res<ScenarioReport> {
    match name {
        "handoff" => ours::handoff(ctx).await,
        "lock_bench" => crate::lock_bench::lock_bench(ctx).await,
        "fifo" => ours::fifo(ctx, false).await,
        "fifo_one_manager" => ours::fifo(ctx, true).await,
        "capacity" => ours::capacity(ctx).await,
        "holders10k" => holders::holders10k(ctx).await,
        "semaphore_fifo_one_manager" => {
            semaphore_fifo::semaphore_fifo(ctx, Layout::OneManager).await
        }
        "semaphore_fifo_managers" => semaphore_fifo::semaphore_fifo(ctx, Layout::OwnManagers).await,
        "semaphore_fifo" => semaphore_fifo::semaphore_fifo(ctx, Layout::Random(4)).await,
        "election_resign" => election::election_resign(ctx).await,
        "election_failover" => election::election_failover(ctx).await,
        "failover" => crate::failover::failover(ctx).await,
        "segments" => crate::segments::segments(ctx).await,
        other => Err(format!("unknown scenario {other}").into()),
    }
}
