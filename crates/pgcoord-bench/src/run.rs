//! One run of the lock scenarios: rounds, ratios, targets, the printed
//! tables, the JSON report and the plots.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::args::Args;
use crate::ctx::{Ctx, ScenarioReport};
use crate::interrupt::{self, Signals};
use crate::probe::Monitor;
use crate::scenarios::{COORDINATION, ON_REQUEST, OTHERS, RATIOS, THROUGHPUT};
use crate::stats::Aggregate;
use crate::transport::Transport;
use crate::{
    ctx, election, errors, failover, figures, holders, leftovers, metrics_overhead, plots,
    preflight, ratios, readmodels, report, scenarios, semaphore_fifo, sweep, targets, transport,
    Res,
};

/// Runs `f`, prefixing any error with the scenario's name and the server's own words.
fn named(name: &str, e: Box<dyn std::error::Error + Send + Sync>) -> String {
    format!("{name}: {}", errors::describe(&*e))
}

pub async fn bench(args: &Args) -> Res<()> {
    metrics_overhead::install_recorder(args.metrics_recorder)?;
    let began = Instant::now();
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 6 }).max(1);
    let warmup = Duration::from_millis(300);
    let measure = Duration::from_secs_f64(args.seconds.unwrap_or(1.5));

    let (options, url, db) = ctx::setup().await?;
    if args.readmodels {
        return readmodels::run(&url, rounds, measure, args.quick, args.catch_up_events).await;
    }
    let (options, transport) = transport::resolve(options).await?;
    let mut signals = Signals::install()?;
    let monitor = Arc::new(Monitor::open(&options).await?);
    // From here on the monitor may have created pg_stat_statements: drop
    // it again whatever happens.
    if let Err(e) = leftovers::sweep(monitor.client()).await {
        eprintln!(
            "note: cannot look for tables earlier runs left: {}",
            errors::describe(&*e)
        );
    }
    let run = bench_on(
        args,
        rounds,
        warmup,
        measure,
        began,
        (options, transport),
        &url,
        &db,
        &monitor,
    );
    // A signal stops the scenarios and takes away what they had created.
    let result = interrupt::or_stop(run, &mut signals, &monitor).await;
    let cleaned = monitor.clean_up().await;
    drop(monitor);
    drop(db);
    result?;
    cleaned.map_err(|e| {
        format!(
            "cannot drop the pg_stat_statements extension the run created: {}",
            errors::describe(&*e)
        )
    })?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn bench_on(
    args: &Args,
    rounds: usize,
    warmup: Duration,
    measure: Duration,
    began: Instant,
    (options, transport): (pgcoord::ConnectOptions, Transport),
    url: &str,
    db: &Option<pgcoord_testkit::pg::TestDatabase>,
    monitor: &Arc<Monitor>,
) -> Res<()> {
    let plot_dir = match (&args.plots, args.docs_plots) {
        (Some(dir), _) => dir.clone(),
        (None, true) => plots::docs_dir()?,
        (None, false) => plots::default_dir(),
    };
    let selected = |name: &str| {
        args.only.is_empty()
            || args
                .only
                .iter()
                .any(|o| o == name || (o == "coordination" && COORDINATION.contains(&name)))
    };
    if let Some(why) = monitor.statements_unavailable() {
        eprintln!("note: statement counts left empty: {why}");
    }
    let server_version = monitor.show("server_version").await?;
    let room = pgcoord_workloads::lock_table_room(monitor.client()).await?;
    let lock_table_short = ctx::lock_table_short(&room);
    eprintln!(
        "PostgreSQL {server_version} ({}, {}), lock table {} slots \
         (max_locks_per_transaction={} x {} backend slots); {rounds} round(s) \
         of {:.1} s (+{:.1} s warm-up) per scenario",
        if db.is_some() {
            "throwaway cluster"
        } else {
            "DATABASE_URL"
        },
        transport.name(),
        room.slots,
        room.max_locks_per_transaction,
        room.backend_slots,
        measure.as_secs_f64(),
        warmup.as_secs_f64()
    );
    let ctx = Ctx {
        options,
        transport,
        url: url.to_owned(),
        monitor: monitor.clone(),
        warmup,
        measure,
        quick: args.quick,
        batched_sessions: args.batched_sessions,
        trials: args.trials,
        lock_table_short,
        lock_table_slots: u64::try_from(room.slots).ok(),
        private_server: db.is_some(),
    };
    let mut skipped: BTreeMap<String, String> = BTreeMap::new();
    let mut runnable = |name: &str| -> bool {
        if !selected(name) {
            return false;
        }
        match scenarios::skip_reason(name, &ctx) {
            Some(why) => {
                if !skipped.contains_key(name) {
                    eprintln!("skipping {name}: {why}");
                    skipped.insert(name.to_owned(), why);
                }
                false
            }
            None => true,
        }
    };
    let throughput: Vec<&str> = THROUGHPUT.iter().copied().filter(|n| runnable(n)).collect();
    // The scenarios that take minutes run only when named.
    let named_only = |n: &str| !ON_REQUEST.contains(&n) || args.only.iter().any(|o| o == n);
    let others: Vec<&str> = OTHERS
        .iter()
        .chain(ON_REQUEST.iter())
        .copied()
        .filter(|n| named_only(n) && runnable(n))
        .collect();

    let sweep_rounds = args.sweep_rounds.unwrap_or(if args.quick { 1 } else { 3 });
    let mut needs: Vec<&str> = throughput.iter().chain(&others).copied().collect();
    if sweep_rounds > 0 && selected("sweep") {
        needs.push("sweep");
    }
    preflight::session_locks(&ctx.options).await?;
    if let Some(most) = needs.iter().max_by_key(|n| preflight::sessions_needed(n)) {
        let n = preflight::sessions_needed(most);
        preflight::check(&ctx.options, n, &format!("{most}: {n}")).await?;
    }

    // A scenario that fails is reported and dropped; the others go on.
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut aggs: BTreeMap<&str, Aggregate> = BTreeMap::new();
    for round in 0..rounds {
        for &name in &throughput {
            if failed.contains_key(name) {
                continue;
            }
            let run = match scenarios::run_throughput(name, &ctx, round).await {
                Ok(run) => run,
                Err(e) => {
                    let why = named(name, e);
                    eprintln!("  round {}/{rounds} FAILED {why}", round + 1);
                    failed.insert(name.to_owned(), why);
                    aggs.remove(name);
                    continue;
                }
            };
            let agg = aggs.entry(name).or_default();
            let s = run.sampled;
            agg.add_run(
                &run.w,
                run.workers,
                s.connections,
                (s.allocs, s.alloc_bytes),
                run.extra,
            );
            if let Some(ns) = s.client_cpu_ns {
                *agg.client_cpu_ns.get_or_insert(0) += ns;
            }
            if let Some(ns) = s.server_cpu_ns {
                *agg.server_cpu_ns.get_or_insert(0) += ns;
            }
            if let Some((calls, rows)) = s.statements {
                let st = agg.statements.get_or_insert((0, 0));
                st.0 += calls.max(0) as u64;
                st.1 += rows.max(0) as u64;
            }
            eprintln!(
                "  round {}/{rounds} {name:<20} {:>10.0} ops/s",
                round + 1,
                agg.round_ops_per_sec.last().copied().unwrap_or(0.0)
            );
        }
    }
    let mut scenarios: BTreeMap<String, ScenarioReport> = BTreeMap::new();
    for (name, agg) in aggs.iter_mut() {
        agg.finish();
        scenarios.insert((*name).to_owned(), report::throughput_report(name, agg));
    }
    drop(aggs);
    for &name in &others {
        let t = Instant::now();
        match scenarios::run_other(name, &ctx).await {
            Ok(report) => {
                eprintln!("  {name:<20} done in {:.1} s", t.elapsed().as_secs_f64());
                scenarios.insert(name.to_owned(), report);
            }
            Err(e) => {
                let why = named(name, e);
                eprintln!("  FAILED {why}");
                failed.insert(name.to_owned(), why);
            }
        }
    }

    if selected("metrics") {
        let bin = args.metrics_bin.as_deref();
        match (metrics_overhead::skip_reason(bin), bin) {
            (Some(why), _) => {
                eprintln!("skipping metrics: {why}");
                skipped.insert("metrics".into(), why);
            }
            (None, None) => {}
            (None, Some(bin)) => {
                let t = Instant::now();
                match metrics_overhead::run(&ctx, bin, rounds).await {
                    Ok(reports) => {
                        eprintln!(
                            "  {:<20} done in {:.1} s",
                            "metrics",
                            t.elapsed().as_secs_f64()
                        );
                        scenarios.extend(reports);
                    }
                    Err(e) => {
                        let why = named("metrics", e);
                        eprintln!("  FAILED {why}");
                        failed.insert("metrics".into(), why);
                    }
                }
            }
        }
    }
    let sweeps = if sweep_rounds > 0 && selected("sweep") {
        let sweep_ctx = Ctx {
            measure: Duration::from_secs_f64(args.sweep_seconds.unwrap_or(1.0)),
            ..ctx.clone()
        };
        let t = Instant::now();
        match sweep::run(&sweep_ctx, sweep_rounds).await {
            Ok(s) => {
                eprintln!(
                    "  {:<20} done in {:.1} s",
                    "sweep",
                    t.elapsed().as_secs_f64()
                );
                Some(s)
            }
            Err(e) => {
                let why = named("sweep", e);
                eprintln!("  FAILED {why}");
                failed.insert("sweep".into(), why);
                None
            }
        }
    } else {
        None
    };

    let (ratios, round_ratios) = ratios::ratios(&scenarios);
    let mut targets = targets::targets(&scenarios, &ratios, &round_ratios);
    targets.extend(semaphore_fifo::targets(&scenarios));
    targets.extend(election::targets(&scenarios));
    targets.extend(failover::targets(&scenarios));

    let order: Vec<&str> = THROUGHPUT
        .iter()
        .chain(OTHERS.iter())
        .chain(ON_REQUEST.iter())
        .chain(scenarios::METRICS.iter())
        .copied()
        .collect();
    report::print_table(&order, &scenarios);
    println!();
    println!(
        "{:<38} {:>8}   per round: min / median / max",
        "ratio (ops/s)", "run"
    );
    for (num, den) in RATIOS {
        let k = format!("{num}/{den}");
        if let Some(v) = ratios.get(&k) {
            let (lo, med, hi) = report::spread(&round_ratios[&k]);
            println!("{k:<38} {v:>8.2}   {lo:.2} / {med:.2} / {hi:.2}");
        }
    }
    targets::print_targets(&targets);
    if let Some(r) = scenarios.get("holders10k") {
        holders::print(r);
    }
    semaphore_fifo::print(&scenarios);
    election::print(&scenarios);
    failover::print(&scenarios);
    if let Some(s) = &sweeps {
        sweep::print(s);
    }
    match figures::write(&plot_dir, sweeps.as_ref(), &scenarios, &round_ratios) {
        Ok(written) if written.is_empty() => {}
        Ok(written) => {
            println!("\nplots in {}:", plot_dir.display());
            for f in written {
                println!("  {f}");
            }
        }
        Err(e) => {
            let why = named("plots", e);
            eprintln!("  FAILED {why}");
            failed.insert("plots".into(), why);
        }
    }
    for (name, why) in &skipped {
        println!("skipped {name}: {why}");
    }
    for why in failed.values() {
        println!("FAILED {why}");
    }
    let total = began.elapsed();
    println!("\ntotal {:.1} s", total.as_secs_f64());

    if let Some(path) = &args.json {
        let report = json!({
            "scenarios": scenarios,
            "sweeps": sweeps,
            "ratios": ratios,
            "ratios_per_round": round_ratios,
            "targets": targets,
            "skipped": skipped,
            "failed": failed,
            "meta": {
                "quick": args.quick,
                "rounds": rounds,
                "warmup_s": warmup.as_secs_f64(),
                "measure_s": measure.as_secs_f64(),
                "server_version": server_version,
                "max_locks_per_transaction": room.max_locks_per_transaction,
                "lock_table_slots": room.slots,
                "backend_slots": room.backend_slots,
                "transport": transport.name(),
                "statement_counts": ctx.monitor.statements_unavailable().is_none(),
                "database": if db.is_some() { "throwaway cluster" } else { "DATABASE_URL" },
                "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                "total_s": total.as_secs_f64(),
            },
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        eprintln!("wrote {}", path.display());
    }
    drop(ctx);
    match failed.len() {
        0 => Ok(()),
        n => Err(format!("{n} scenario(s) failed (see above)").into()),
    }
}
