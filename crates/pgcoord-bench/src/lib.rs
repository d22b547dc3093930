//! The benchmark of the PostgreSQL lock manager against the raw-SQL limit
//! and sqlx, side by side in one run (issues 4, 9, 11, 12 and 13). The binary
//! (`src/main.rs`) and `cargo bench` (`benches/locks.rs`) both call
//! [`main_with`]. See `docs/performance.md`.
//!
//! Uses `DATABASE_URL` when set; otherwise starts a throwaway cluster from
//! `pgcoord_testkit::pg` (with `max_locks_per_transaction=256`, so the
//! scenarios holding 10,000 locks fit, and `pg_stat_statements` preloaded,
//! for exact statement counts per scenario).
//!
//! Besides ops/s and latency percentiles, each throughput scenario reports
//! what it cost: client and server CPU per lock+unlock pair (from /proc,
//! robust to other load on the machine, unlike ops/s), heap allocations per
//! pair (a counting global allocator) and lock statements per pair.
//!
//! Layout: `args` (command line), `run` (one run: rounds, ratios, output),
//! `ctx` (what scenarios get and return), `scenarios` (the registry),
//! `report` / `ratios` / `targets` (output), `transport` (TLS or plaintext,
//! the same for every session), `preflight` (the server sessions a run needs),
//! `cleanup` (what scenarios create, dropped again), `leftovers` (what an
//! interrupted or earlier run left) and `interrupt` (SIGINT, SIGTERM), `sweep` (the series behind the plots),
//! `plots` (SVG) and `figures` (which plot from which results), one file
//! per family of scenarios (`raw`, `ours`, `ours_load`, `fenced`,
//! `holders`, `abandoned`, `contention` + `contention_worker`,
//! `metrics_overhead`, `failover` + `failover_trial`; for the coordination primitives,
//! `semaphore_fifo` + `order` and `election` + `election_leader` +
//! `election_raw`), `probe` / `stats` / `alloc`, and the read-model
//! scenarios (`readmodels`, `--readmodels`).

mod abandoned;
mod alloc;
mod args;
mod child;
mod cleanup;
mod contention;
mod contention_worker;
mod ctx;
mod election;
mod election_leader;
mod election_raw;
mod errors;
mod failover;
mod failover_trial;
mod fenced;
mod figures;
mod holders;
mod interrupt;
mod leftovers;
mod lock_bench;
mod metrics_overhead;
mod order;
mod ours;
mod ours_load;
mod plots;
mod preflight;
mod probe;
mod ratios;
mod raw;
mod raw_fenced;
mod readmodels;
mod report;
mod run;
mod scenarios;
mod segments;
mod semaphore_fifo;
mod stats;
mod sweep;
mod targets;
mod transport;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::args::Args;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// The bench's error type: anything, with a message.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Parses `args` (the program name first) and runs the benchmark, or one
/// worker process of the `contention` scenario, or the leader process of
/// `election_failover`; the exit code tells whether
/// every scenario ran.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = Args::parse_from(args);
    if let Err(why) = args.check() {
        use clap::CommandFactory;
        Args::command()
            .error(clap::error::ErrorKind::ValueValidation, why)
            .exit();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match (args.contention_worker, args.election_leader) {
            (true, _) => contention_worker::run(&child::spec()?).await,
            (false, true) => election_leader::run(&child::spec()?).await,
            (false, false) => run::bench(&args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<interrupt::Interrupted>() => {
            let stop = e.downcast_ref::<interrupt::Interrupted>().copied();
            ExitCode::from(stop.map_or(1, |s| s.exit_code))
        }
        Err(e) => {
            eprintln!("Error: {}", errors::describe(&*e));
            ExitCode::FAILURE
        }
    }
}
