//! `eventsource-bench`: the lock manager against the raw-SQL limit and sqlx,
//! side by side in one run (issue 4). See `docs/performance.md`.
//!
//! ```text
//! cargo run --release -p eventsource-bench -- [--json PATH] [--quick]
//! ```
//!
//! Uses `DATABASE_URL` when set; otherwise starts a throwaway cluster from
//! `eventsource::testing::pg` (with `max_locks_per_transaction=256`, so the
//! capacity scenario's 10,000 locks fit).

mod alloc;
mod ours;
mod probe;
mod raw;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use eventsource::testing::pg::{ClusterOptions, TestCluster, TestDatabase};
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
const THROUGHPUT: [&str; 8] = [
    "raw_seq",
    "raw_pipelined64",
    "raw_batched",
    "sqlx_seq",
    "sqlx_pool64",
    "ours_seq",
    "ours_try_seq",
    "ours_conc64",
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
}

/// What every scenario needs.
pub struct Ctx {
    pub config: tokio_postgres::Config,
    pub url: String,
    pub monitor: Arc<Monitor>,
    pub warmup: Duration,
    pub measure: Duration,
    pub quick: bool,
}

/// What was sampled while a window was open.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sampled {
    allocs: u64,
    alloc_bytes: u64,
    connections: u32,
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
            tokio::time::sleep_until((w.start + (w.end - w.start) / 2).into()).await;
            let connections = monitor.sessions_like(&pattern).await?;
            tokio::time::sleep_until(w.end.into()).await;
            let (a1, b1) = alloc::totals();
            Ok(Sampled {
                allocs: a1 - a0,
                alloc_bytes: b1 - b0,
                connections,
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
        "{:<17} {:>12} {:>9} {:>9} {:>9} {:>6} {:>10}",
        "scenario", "ops/s", "p50 us", "p99 us", "p99.9 us", "conns", "allocs/op"
    );
    println!("{}", "-".repeat(78));
    for name in order {
        let Some(r) = s.get(*name) else { continue };
        let f = |k: &str| r.extra.get(k).and_then(Value::as_f64);
        let p999 = f("p999_us")
            .map(|v| format!("{v:.0}"))
            .unwrap_or_else(|| "-".into());
        let allocs = f("allocs_per_op")
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<17} {:>12.0} {:>9.0} {:>9.0} {:>9} {:>6} {:>10}",
            name, r.ops_per_sec, r.p50_us, r.p99_us, p999, r.connections, allocs
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
                    settings: vec![("max_locks_per_transaction".into(), "256".into())],
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
        (3, Duration::from_millis(500), Duration::from_secs(4))
    };
    let rounds = args.rounds.unwrap_or(rounds).max(1);
    let measure = args.seconds.map(Duration::from_secs_f64).unwrap_or(measure);
    let selected = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);

    let (config, url, db) = setup().await?;
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
    let mut ratios = BTreeMap::new();
    for (num, den) in [
        ("ours_seq", "raw_seq"),
        ("ours_conc64", "raw_pipelined64"),
        ("ours_conc64", "sqlx_pool64"),
    ] {
        if let (Some(a), Some(b)) = (ops(num), ops(den)) {
            ratios.insert(format!("{num}/{den}"), a / b);
        }
    }
    let targets = targets(&scenarios, &ratios);

    let order: Vec<&str> = THROUGHPUT.iter().chain(OTHERS.iter()).copied().collect();
    print_table(&order, &scenarios);
    println!();
    for (k, v) in &ratios {
        println!("ratio {k:<28} {v:>8.2}");
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
