//! The series behind the plots: throughput against the number of concurrent
//! tasks (ours, sqlx, raw SQL) and against the number of locks the manager
//! holds. Each point is a throughput scenario of its own (`ours_conc{N}`,
//! `sqlx_pool{N}`, `raw_pipelined{N}`, `ours_conc64_held{N}`), run for a
//! shorter window than the main rounds and interleaved over their own
//! rounds: in each round the three implementations at one task count run
//! back to back.

use serde::Serialize;

use crate::ctx::Ctx;
use crate::report::spread;
use crate::stats::Aggregate;
use crate::{scenarios, Res};

/// Concurrent tasks of the tasks sweep.
pub const TASKS: [usize; 6] = [1, 4, 16, 64, 256, 1024];
/// Locks held by the manager in the held-locks sweep (64 tasks each).
pub const HELD: [usize; 5] = [0, 100, 1_000, 3_000, 10_000];

/// One implementation's line in a plot.
#[derive(Debug, Serialize)]
pub struct Series {
    pub label: &'static str,
    pub points: Vec<Point>,
}

/// One point: x (tasks or locks held), the run's pairs/s, each round's
/// pairs/s (ascending) and the latency of one pair.
#[derive(Debug, Serialize)]
pub struct Point {
    pub x: usize,
    pub scenario: String,
    pub ops_per_sec: f64,
    pub rounds_ops_per_sec: Vec<f64>,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Point {
    /// (min, median, max) of the rounds' pairs/s.
    pub fn spread(&self) -> (f64, f64, f64) {
        spread(&self.rounds_ops_per_sec)
    }
}

/// Both sweeps of one run.
#[derive(Debug, Serialize)]
pub struct Sweeps {
    pub rounds: usize,
    pub measure_s: f64,
    pub tasks: Vec<Series>,
    pub held: Vec<Series>,
    /// Held-lock counts left out, with the reason (the server's lock table).
    pub held_skipped: Vec<(usize, String)>,
}

/// One implementation of the tasks sweep: its label, and its scenario's name for N tasks.
type Impl = (&'static str, fn(usize) -> String);

/// The implementations of the tasks sweep.
fn tasks_impls() -> [Impl; 3] {
    [
        ("raw SQL (one pipelined connection)", |n| {
            format!("raw_pipelined{n}")
        }),
        ("eventsource (one manager)", |n| format!("ours_conc{n}")),
        ("sqlx (PgAdvisoryLock, pool of <= 8)", |n| {
            format!("sqlx_pool{n}")
        }),
    ]
}

/// Runs both sweeps: `rounds` rounds, every point once per round, each for
/// `ctx.measure` after `ctx.warmup`. A point that fails is reported and
/// left out; the others go on.
pub async fn run(ctx: &Ctx, rounds: usize) -> Res<Sweeps> {
    let impls = tasks_impls();
    let mut task_aggs: Vec<Vec<Aggregate>> = impls
        .iter()
        .map(|_| TASKS.iter().map(|_| Aggregate::default()).collect())
        .collect();
    let mut held_skipped = Vec::new();
    let held: Vec<usize> = HELD
        .iter()
        .copied()
        .filter(|&h| match ctx.lock_table_slots {
            Some(slots) if slots >= 2 * h as u64 => true,
            _ if h == 0 => true,
            slots => {
                held_skipped.push((
                    h,
                    format!(
                        "the server's lock table has {} slots; holding {h} needs {}",
                        slots.map_or("an unknown number of".into(), |s| s.to_string()),
                        2 * h
                    ),
                ));
                false
            }
        })
        .collect();
    let mut held_aggs: Vec<Aggregate> = held.iter().map(|_| Aggregate::default()).collect();
    let mut failed: Vec<String> = Vec::new();
    for round in 0..rounds {
        for (ti, &n) in TASKS.iter().enumerate() {
            for (ii, (_, name_of)) in impls.iter().enumerate() {
                let name = name_of(n);
                if failed.contains(&name) {
                    continue;
                }
                match scenarios::run_throughput(&name, ctx, round).await {
                    Ok(run) => task_aggs[ii][ti].add_run(
                        &run.w,
                        run.workers,
                        run.sampled.connections,
                        (0, 0),
                        Default::default(),
                    ),
                    Err(e) => {
                        eprintln!("  sweep {name} FAILED: {}", crate::errors::describe(&*e));
                        failed.push(name);
                    }
                }
            }
        }
        for (hi, &h) in held.iter().enumerate() {
            let name = held_name(h);
            if failed.contains(&name) {
                continue;
            }
            match scenarios::run_throughput(&name, ctx, round).await {
                Ok(run) => held_aggs[hi].add_run(
                    &run.w,
                    run.workers,
                    run.sampled.connections,
                    (0, 0),
                    Default::default(),
                ),
                Err(e) => {
                    eprintln!("  sweep {name} FAILED: {}", crate::errors::describe(&*e));
                    failed.push(name);
                }
            }
        }
        eprintln!("  sweep round {}/{rounds} done", round + 1);
    }
    let point = |x: usize, scenario: String, agg: &mut Aggregate| -> Option<Point> {
        if agg.round_ops_per_sec.is_empty() {
            return None;
        }
        agg.finish();
        let mut rounds = agg.round_ops_per_sec.clone();
        rounds.sort_by(f64::total_cmp);
        Some(Point {
            x,
            scenario,
            ops_per_sec: agg.ops_per_sec(),
            rounds_ops_per_sec: rounds,
            p50_us: agg.pct_us(50.0),
            p99_us: agg.pct_us(99.0),
        })
    };
    let tasks = impls
        .iter()
        .zip(task_aggs.iter_mut())
        .map(|((label, name_of), aggs)| Series {
            label,
            points: TASKS
                .iter()
                .zip(aggs.iter_mut())
                .filter_map(|(&n, agg)| point(n, name_of(n), agg))
                .collect(),
        })
        .collect();
    let held = vec![Series {
        label: "eventsource, 64 tasks",
        points: held
            .iter()
            .zip(held_aggs.iter_mut())
            .filter_map(|(&h, agg)| point(h, held_name(h), agg))
            .collect(),
    }];
    Ok(Sweeps {
        rounds,
        measure_s: ctx.measure.as_secs_f64(),
        tasks,
        held,
        held_skipped,
    })
}

/// The scenario of the held-locks sweep holding `held` other locks.
fn held_name(held: usize) -> String {
    if held == 0 {
        "ours_conc64".into()
    } else {
        format!("ours_conc64_held{held}")
    }
}

/// Prints both sweeps as tables.
pub fn print(s: &Sweeps) {
    println!(
        "\nsweep: pairs/s against concurrent tasks ({} round(s) of {:.1} s; per round min / median / max)",
        s.rounds, s.measure_s
    );
    for series in &s.tasks {
        println!("  {}", series.label);
        for p in &series.points {
            let (lo, med, hi) = p.spread();
            println!(
                "    {:>5} tasks {:>10.0} pairs/s  ({lo:.0} / {med:.0} / {hi:.0})  p50 {:.0} us, p99 {:.0} us",
                p.x, p.ops_per_sec, p.p50_us, p.p99_us
            );
        }
    }
    println!("sweep: pairs/s against locks held by the manager (64 tasks)");
    for series in &s.held {
        for p in &series.points {
            let (lo, med, hi) = p.spread();
            println!(
                "    {:>6} held {:>10.0} pairs/s  ({lo:.0} / {med:.0} / {hi:.0})  p50 {:.0} us, p99 {:.0} us",
                p.x, p.ops_per_sec, p.p50_us, p.p99_us
            );
        }
    }
    for (h, why) in &s.held_skipped {
        println!("    {h} held: skipped ({why})");
    }
}
