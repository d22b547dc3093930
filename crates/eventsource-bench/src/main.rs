//! `eventsource-bench`: the lock manager against the raw-SQL limit and sqlx,
//! side by side in one run (issue 4). See `docs/performance.md`.
//!
//! ```text
//! cargo run --release -p eventsource-bench -- [--json PATH] [--quick]
//! ```
//!
//! Uses `DATABASE_URL` when set; otherwise starts a throwaway cluster from
//! `eventsource_testkit::pg` (with `max_locks_per_transaction=256`, so the
//! capacity scenario's 10,000 locks fit, and `pg_stat_statements` preloaded,
//! for exact statement counts per scenario).
//!
//! Besides ops/s and latency percentiles, each throughput scenario reports
//! what it cost: client and server CPU per lock+unlock pair (from /proc,
//! robust to other load on the machine, unlike ops/s), heap allocations per
//! pair (a counting global allocator) and lock statements per pair.

mod alloc;
mod ours;
mod probe;
mod raw;
mod readmodels;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use eventsource_testkit::pg::{ClusterOptions, TestCluster, TestDatabase};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::task::JoinHandle;

use crate::probe::Monitor;
use crate::stats::{Aggregate, Window, WorkerOut};

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// The bench's error type: anything, with a message.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Throughput scenarios, run for a fixed time each, interleaved over rounds.
/// Ordered so that the scenarios compared in a ratio run next to each other:
/// load from elsewhere on the machine then hits both alike.
const THROUGHPUT: [&str; 11] = [
    "raw_seq",
    "ours_seq",
    "ours_try_seq",
    "raw_seq_actor",
    "raw_seq_actor_inline",
    "raw_seq_inline",
    "sqlx_seq",
    "raw_pipelined64",
    "ours_conc64",
    "sqlx_pool64",
    "raw_batched",
];

/// Latency / correctness scenarios on the lock manager, run once after the throughput rounds.
const OTHERS: [&str; 4] = ["handoff", "fifo", "fifo_one_manager", "capacity"];

#[derive(Parser, Debug)]
#[command(about = "Benchmark the PostgreSQL lock manager against raw tokio-postgres and sqlx")]
struct Args {
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A short run (under 60 s on 2 cores): 1 round of 1.5 s per scenario, fewer trials.
    /// The default run: 8 interleaved rounds of 1.5 s per scenario (about 3 minutes).
    #[arg(long)]
    quick: bool,
    /// Run only these scenarios (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Override the measured seconds per scenario and round.
    #[arg(long)]
    seconds: Option<f64>,
    /// Override the number of interleaved rounds.
    #[arg(long)]
    rounds: Option<usize>,
    /// Run the read-model scenarios (PostgreSQL and SQLite) instead of the lock ones.
    #[arg(long)]
    readmodels: bool,
    /// Experiment: shared sessions per manager (the builder's `shared_sessions`);
    /// default: the manager's own default.
    #[arg(long)]
    shared_sessions: Option<usize>,
}

/// What every scenario needs.
pub struct Ctx {
    pub config: tokio_postgres::Config,
    pub url: String,
    pub monitor: Arc<Monitor>,
    pub warmup: Duration,
    pub measure: Duration,
    pub quick: bool,
    pub shared_sessions: Option<usize>,
}

/// What was sampled while a window was open.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sampled {
    allocs: u64,
    alloc_bytes: u64,
    connections: u32,
    statements: Option<(i64, i64)>,
    /// CPU time of this process over the window.
    client_cpu_ns: Option<u64>,
    /// CPU time of the scenario's server backends over the window (local server only).
    server_cpu_ns: Option<u64>,
}

impl Ctx {
    /// Opens a measured window after the warm-up and samples, in the
    /// background, allocations over the window and, at its midpoint, the
    /// sessions whose `application_name` matches `app_pattern` (LIKE).
    pub fn start_window(&self, app_pattern: &str) -> (Window, JoinHandle<Res<Sampled>>) {
        let w = Window::after(self.warmup, self.measure);
        let monitor = self.monitor.clone();
        let pattern = app_pattern.to_owned();
        let probe = tokio::spawn(async move {
            tokio::time::sleep_until(w.start.into()).await;
            let (a0, b0) = alloc::totals();
            let s0 = monitor.lock_statements().await?;
            let c0 = alloc::cpu_ns(None);
            let pids = monitor.pids_like(&pattern).await?;
            let server_cpu = |pids: &[i32]| -> Option<u64> {
                if pids.is_empty() {
                    return None;
                }
                pids.iter().map(|p| alloc::cpu_ns(Some(*p))).sum()
            };
            let p0 = server_cpu(&pids);
            tokio::time::sleep_until((w.start + (w.end - w.start) / 2).into()).await;
            let connections = monitor.sessions_like(&pattern).await?;
            tokio::time::sleep_until(w.end.into()).await;
            let (a1, b1) = alloc::totals();
            let c1 = alloc::cpu_ns(None);
            let p1 = server_cpu(&pids);
            let s1 = monitor.lock_statements().await?;
            let statements = s0.zip(s1).map(|(a, b)| (b.0 - a.0, b.1 - a.1));
            Ok(Sampled {
                allocs: a1 - a0,
                alloc_bytes: b1 - b0,
                connections,
                statements,
                client_cpu_ns: c0.zip(c1).map(|(a, b)| b.saturating_sub(a)),
                server_cpu_ns: p0.zip(p1).map(|(a, b)| b.saturating_sub(a)),
            })
        });
        (w, probe)
    }
}

/// One run of a throughput scenario.
pub struct RunOut {
    w: Window,
    workers: Vec<WorkerOut>,
    sampled: Sampled,
}

impl RunOut {
    pub async fn finish(
        w: Window,
        workers: Vec<WorkerOut>,
        probe: JoinHandle<Res<Sampled>>,
    ) -> Res<Self> {
        let sampled = probe.await??;
        Ok(Self {
            w,
            workers,
            sampled,
        })
    }
}

/// One scenario's line in the report; `extra` holds scenario-specific figures.
#[derive(Debug, Serialize)]
pub struct ScenarioReport {
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub connections: u32,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

async fn run_throughput(name: &str, ctx: &Ctx, round: usize) -> Res<RunOut> {
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
        "ours_conc64" => ours::ours_conc64(ctx, round).await,
        other => Err(format!("unknown scenario {other}").into()),
    }
}

async fn run_other(name: &str, ctx: &Ctx) -> Res<ScenarioReport> {
    match name {
        "handoff" => ours::handoff(ctx).await,
        "fifo" => ours::fifo(ctx, false).await,
        "fifo_one_manager" => ours::fifo(ctx, true).await,
        "capacity" => ours::capacity(ctx).await,
        other => Err(format!("unknown scenario {other}").into()),
    }
}

fn throughput_report(name: &str, agg: &Aggregate) -> ScenarioReport {
    let ops = agg.ops.max(1) as f64;
    let mut extra = Map::new();
    extra.insert("p90_us".into(), json!(agg.pct_us(90.0)));
    extra.insert("p999_us".into(), json!(agg.pct_us(99.9)));
    extra.insert("max_us".into(), json!(agg.pct_us(100.0)));
    extra.insert("ops".into(), json!(agg.ops));
    extra.insert("seconds".into(), json!(agg.elapsed.as_secs_f64()));
    extra.insert("rounds_ops_per_sec".into(), json!(agg.round_ops_per_sec));
    extra.insert("allocs_per_op".into(), json!(agg.allocs as f64 / ops));
    extra.insert(
        "alloc_bytes_per_op".into(),
        json!(agg.alloc_bytes as f64 / ops),
    );
    // CPU per pair: robust to other load on the machine, unlike ops/s.
    if let Some(ns) = agg.client_cpu_ns {
        extra.insert("client_cpu_us_per_op".into(), json!(ns as f64 / 1e3 / ops));
    }
    if let Some(ns) = agg.server_cpu_ns {
        extra.insert("server_cpu_us_per_op".into(), json!(ns as f64 / 1e3 / ops));
    }
    // Lock statements the server ran per lock+unlock pair, and ids per statement
    // (rows returned), from pg_stat_statements: how much batching happened.
    if let Some((calls, rows)) = agg.statements {
        extra.insert("server_statements_per_op".into(), json!(calls as f64 / ops));
        extra.insert(
            "ids_per_statement".into(),
            json!(rows as f64 / (calls.max(1)) as f64),
        );
    }
    if name == "raw_batched" {
        extra.insert("batch_size".into(), json!(raw::BATCH));
        extra.insert(
            "latency_of".into(),
            json!("one batch: 1,000 locks in one statement, then 1,000 unlocks in one"),
        );
    } else {
        extra.insert("latency_of".into(), json!("one lock + unlock pair"));
    }
    ScenarioReport {
        ops_per_sec: agg.ops_per_sec(),
        p50_us: agg.pct_us(50.0),
        p99_us: agg.pct_us(99.0),
        connections: agg.connections,
        extra,
    }
}

#[derive(Debug, Serialize)]
struct Target {
    name: &'static str,
    target: String,
    value: f64,
    met: bool,
}

fn targets(s: &BTreeMap<String, ScenarioReport>, ratios: &BTreeMap<String, f64>) -> Vec<Target> {
    let mut out = Vec::new();
    let mut push = |name: &'static str, target: &str, value: Option<f64>, met: fn(f64) -> bool| {
        if let Some(v) = value {
            out.push(Target {
                name,
                target: target.into(),
                value: v,
                met: met(v),
            });
        }
    };
    let extra = |name: &str, field: &str| {
        s.get(name)
            .and_then(|r| r.extra.get(field))
            .and_then(Value::as_f64)
    };
    push(
        "ours_seq/raw_seq",
        ">= 0.8",
        ratios.get("ours_seq/raw_seq").copied(),
        |v| v >= 0.8,
    );
    push(
        "ours_conc64/raw_pipelined64",
        ">= 3.0",
        ratios.get("ours_conc64/raw_pipelined64").copied(),
        |v| v >= 3.0,
    );
    push(
        "ours_conc64 ops/s (stretch)",
        ">= 100000",
        s.get("ours_conc64").map(|r| r.ops_per_sec),
        |v| v >= 100_000.0,
    );
    push(
        "handoff p50 us",
        "<= 1000",
        s.get("handoff").map(|r| r.p50_us),
        |v| v <= 1000.0,
    );
    push("fifo in order", "= 1.0", extra("fifo", "in_order"), |v| {
        v == 1.0
    });
    push(
        "capacity connections",
        "<= 2",
        s.get("capacity").map(|r| r.connections as f64),
        |v| v <= 2.0,
    );
    push(
        "capacity client bytes/lock",
        "<= 512",
        extra("capacity", "client_bytes_per_lock"),
        |v| v <= 512.0,
    );
    out
}

fn print_table(order: &[&str], s: &BTreeMap<String, ScenarioReport>) {
    println!();
    println!(
        "{:<21} {:>10} {:>7} {:>7} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7}",
        "scenario",
        "ops/s",
        "p50 us",
        "p99 us",
        "conns",
        "cli us/op",
        "srv us/op",
        "alloc/op",
        "stmt/op",
        "ids/stmt"
    );
    println!("{}", "-".repeat(100));
    for name in order {
        let Some(r) = s.get(*name) else { continue };
        let f = |k: &str, prec: usize| {
            r.extra
                .get(k)
                .and_then(Value::as_f64)
                .map(|v| format!("{v:.prec$}"))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<21} {:>10.0} {:>7.0} {:>7.0} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7}",
            name,
            r.ops_per_sec,
            r.p50_us,
            r.p99_us,
            r.connections,
            f("client_cpu_us_per_op", 2),
            f("server_cpu_us_per_op", 2),
            f("allocs_per_op", 1),
            f("server_statements_per_op", 3),
            f("ids_per_statement", 1),
        );
    }
    if let Some(r) = s.get("fifo") {
        println!(
            "fifo: in_order = {}",
            r.extra.get("in_order").unwrap_or(&Value::Null)
        );
    }
    if let Some(r) = s.get("fifo_one_manager") {
        println!(
            "fifo_one_manager: in_order = {}",
            r.extra.get("in_order").unwrap_or(&Value::Null)
        );
    }
    if let Some(r) = s.get("capacity") {
        println!(
            "capacity: held {} on {} connection(s); client {} bytes/lock (allocator), {} bytes/lock (RSS); \
             acquire all {} ms",
            r.extra.get("held").unwrap_or(&Value::Null),
            r.connections,
            r.extra.get("client_bytes_per_lock").unwrap_or(&Value::Null),
            r.extra.get("rss_bytes_per_lock").unwrap_or(&Value::Null),
            r.extra.get("acquire_all_ms").unwrap_or(&Value::Null),
        );
    }
}

async fn setup() -> Res<(tokio_postgres::Config, String, Option<TestDatabase>)> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Ok((url.parse()?, url, None)),
        _ => {
            let cluster = tokio::task::spawn_blocking(|| {
                TestCluster::start_with(ClusterOptions {
                    settings: vec![
                        ("max_locks_per_transaction".into(), "256".into()),
                        // Exact statement counts per scenario (batching), see probe.rs.
                        (
                            "shared_preload_libraries".into(),
                            "pg_stat_statements".into(),
                        ),
                        ("pg_stat_statements.track_utility".into(), "off".into()),
                        ("pg_stat_statements.save".into(), "off".into()),
                    ],
                })
            })
            .await??;
            let db = TestDatabase::create_on(Arc::new(cluster)).await?;
            Ok((db.config(), db.url(), Some(db)))
        }
    }
}

#[tokio::main]
async fn main() -> Res<()> {
    let args = Args::parse();
    let began = Instant::now();
    let (rounds, warmup, measure) = if args.quick {
        (1, Duration::from_millis(300), Duration::from_millis(1500))
    } else {
        (8, Duration::from_millis(300), Duration::from_millis(1500))
    };
    let rounds = args.rounds.unwrap_or(rounds).max(1);
    let measure = args.seconds.map(Duration::from_secs_f64).unwrap_or(measure);
    let selected = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);

    let (config, url, db) = setup().await?;
    if args.readmodels {
        return readmodels::run(&url, rounds, measure, args.quick).await;
    }
    let monitor = Arc::new(Monitor::open(&config).await?);
    let server_version = monitor.show("server_version").await?;
    let max_locks = monitor.show("max_locks_per_transaction").await?;
    eprintln!(
        "PostgreSQL {server_version} ({}), max_locks_per_transaction={max_locks}; {} round(s) of {:.1} s (+{:.1} s warm-up) per scenario",
        if db.is_some() { "throwaway cluster" } else { "DATABASE_URL" },
        rounds,
        measure.as_secs_f64(),
        warmup.as_secs_f64()
    );
    let ctx = Ctx {
        config,
        url,
        monitor,
        warmup,
        measure,
        quick: args.quick,
        shared_sessions: args.shared_sessions,
    };

    let mut aggs: BTreeMap<&str, Aggregate> = BTreeMap::new();
    for round in 0..rounds {
        for name in THROUGHPUT.iter().copied().filter(|n| selected(n)) {
            let run = run_throughput(name, &ctx, round)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            let agg = aggs.entry(name).or_default();
            agg.add_run(
                &run.w,
                run.workers,
                run.sampled.connections,
                (run.sampled.allocs, run.sampled.alloc_bytes),
            );
            if let Some(ns) = run.sampled.client_cpu_ns {
                *agg.client_cpu_ns.get_or_insert(0) += ns;
            }
            if let Some(ns) = run.sampled.server_cpu_ns {
                *agg.server_cpu_ns.get_or_insert(0) += ns;
            }
            if let Some((calls, rows)) = run.sampled.statements {
                agg.statements = Some(agg.statements.unwrap_or((0, 0)));
                if let Some(s) = agg.statements.as_mut() {
                    s.0 += calls.max(0) as u64;
                    s.1 += rows.max(0) as u64;
                }
            }
            eprintln!(
                "  round {}/{rounds} {name:<16} {:>10.0} ops/s",
                round + 1,
                agg.round_ops_per_sec.last().copied().unwrap_or(0.0)
            );
        }
    }
    let mut scenarios: BTreeMap<String, ScenarioReport> = BTreeMap::new();
    for (name, agg) in aggs.iter_mut() {
        agg.finish();
        scenarios.insert((*name).to_owned(), throughput_report(name, agg));
    }
    drop(aggs);
    for name in OTHERS.iter().copied().filter(|n| selected(n)) {
        let t = Instant::now();
        let report = run_other(name, &ctx)
            .await
            .map_err(|e| format!("{name}: {e}"))?;
        eprintln!("  {name:<16} done in {:.1} s", t.elapsed().as_secs_f64());
        scenarios.insert(name.to_owned(), report);
    }

    let ops = |n: &str| scenarios.get(n).map(|r| r.ops_per_sec).filter(|v| *v > 0.0);
    let rounds_of = |n: &str| -> Vec<f64> {
        scenarios
            .get(n)
            .and_then(|r| r.extra.get("rounds_ops_per_sec"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mut ratios = BTreeMap::new();
    // Per-round ratios (paired: both ran back to back in the same round):
    // their spread shows how much load elsewhere on the machine moved them.
    let mut round_ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (num, den) in [
        ("ours_seq", "raw_seq"),
        ("ours_conc64", "raw_pipelined64"),
        ("ours_conc64", "sqlx_pool64"),
        // Informative, not in issue 4.
        ("ours_seq", "sqlx_seq"),
        ("ours_seq", "raw_seq_inline"),
        ("ours_seq", "raw_seq_actor"),
        ("raw_seq_actor_inline", "raw_seq_actor"),
        ("ours_conc64", "raw_batched"),
    ] {
        if let (Some(a), Some(b)) = (ops(num), ops(den)) {
            ratios.insert(format!("{num}/{den}"), a / b);
            let mut per_round: Vec<f64> = rounds_of(num)
                .iter()
                .zip(rounds_of(den))
                .filter(|(_, b)| *b > 0.0)
                .map(|(a, b)| a / b)
                .collect();
            per_round.sort_by(f64::total_cmp);
            round_ratios.insert(format!("{num}/{den}"), per_round);
        }
    }
    let targets = targets(&scenarios, &ratios);

    let order: Vec<&str> = THROUGHPUT.iter().chain(OTHERS.iter()).copied().collect();
    print_table(&order, &scenarios);
    println!();
    println!(
        "{:<34} {:>8}   per round: min / median / max",
        "ratio (ops/s)", "run"
    );
    for (k, v) in &ratios {
        let r = &round_ratios[k];
        let (lo, med, hi) = (
            r.first().copied().unwrap_or(0.0),
            r.get(r.len() / 2).copied().unwrap_or(0.0),
            r.last().copied().unwrap_or(0.0),
        );
        println!("{k:<38} {v:>8.2}   {lo:.2} / {med:.2} / {hi:.2}");
    }
    println!();
    for t in &targets {
        println!(
            "target {:<28} {:<9} value {:>10.2}  {}",
            t.name,
            t.target,
            t.value,
            if t.met { "MET" } else { "MISSED" }
        );
    }
    let total = began.elapsed();
    println!("\ntotal {:.1} s", total.as_secs_f64());

    if let Some(path) = &args.json {
        let report = json!({
            "scenarios": scenarios,
            "ratios": ratios,
            "ratios_per_round": round_ratios,
            "targets": targets,
            "meta": {
                "quick": args.quick,
                "rounds": rounds,
                "warmup_s": warmup.as_secs_f64(),
                "measure_s": measure.as_secs_f64(),
                "server_version": server_version,
                "max_locks_per_transaction": max_locks,
                "database": if db.is_some() { "throwaway cluster" } else { "DATABASE_URL" },
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                "total_s": total.as_secs_f64(),
            },
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    drop(ctx);
    drop(db);
    Ok(())
}
