//! Command line of the bench (and of its hidden worker mode).

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Benchmark the PostgreSQL lock manager against raw tokio-postgres and sqlx")]
pub struct Args {
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A short run: 1 round of 1.5 s per scenario, fewer trials.
    /// The default run: 6 interleaved rounds of 1.5 s per scenario, then the
    /// sweeps (3 rounds of 1 s per point).
    #[arg(long)]
    pub quick: bool,
    /// Run only these scenarios (comma-separated names; `sweep` for the
    /// sweeps behind the plots, `coordination` for the semaphore-order and
    /// election scenarios). `failover` (promotions of private
    /// streaming standbys, a few minutes) runs only when named here.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Write the plots (SVG) into this directory [default: <cargo target
    /// dir>/bench-plots; ./bench-plots for a binary outside a cargo target dir].
    #[arg(long, value_name = "DIR", conflicts_with = "docs_plots")]
    pub plots: Option<PathBuf>,
    /// Write the plots into the repository's docs/plots (the ones
    /// docs/performance.md shows).
    #[arg(long)]
    pub docs_plots: bool,
    /// Rounds of the sweeps (tasks 1 to 1,024; locks held 0 to 10,000)
    /// [default: 3, 1 with --quick]; 0 skips them.
    #[arg(long)]
    pub sweep_rounds: Option<usize>,
    /// Measured seconds per sweep point and round [default: 1.0].
    #[arg(long)]
    pub sweep_seconds: Option<f64>,
    /// Override the measured seconds per scenario and round.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Override the number of interleaved rounds.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Run the read-model scenarios (PostgreSQL and SQLite) instead of the lock ones.
    #[arg(long)]
    pub readmodels: bool,
    /// Events each round's batched catch-up applies, ours and raw alike
    /// (`--readmodels`) [default: 20,000, 5,000 with --quick].
    #[arg(long, value_name = "N")]
    pub catch_up_events: Option<usize>,
    /// Experiment: batched sessions per manager (the builder's `batched_sessions`);
    /// default: the manager's own default.
    #[arg(long)]
    pub batched_sessions: Option<usize>,
    /// The bench binary built with `--features metrics`: runs the
    /// metrics-overhead scenarios (acquire + release with the library's
    /// `metrics` feature off, on without a recorder, on with a Prometheus
    /// recorder), each round in fresh processes.
    #[arg(long, value_name = "PATH")]
    pub metrics_bin: Option<PathBuf>,
    /// Install a Prometheus recorder (no HTTP listener) before running
    /// (needs a binary built with `--features metrics`).
    #[arg(long)]
    pub metrics_recorder: bool,
    /// Trials of the coordination scenarios (`--only coordination`):
    /// `election_failover` [default: 40, 10 with --quick], `election_resign`
    /// [default: 200, 50 with --quick] and each `semaphore_fifo*` (rounds)
    /// [default: 20, 5 with --quick]; also the promotions of `failover`
    /// [default: 20].
    #[arg(long, value_name = "N")]
    pub trials: Option<usize>,
    /// Internal: run as one worker process of the `contention` scenario
    /// (its spec as JSON in `PGCOORD_BENCH_SPEC`, never on the command
    /// line: it holds the password); prints its results as one JSON line.
    #[arg(long, hide = true)]
    pub contention_worker: bool,
    /// Internal: run as the leader process of `election_failover` (its
    /// spec as JSON in `PGCOORD_BENCH_SPEC`); prints one JSON line once it leads.
    #[arg(long, hide = true, conflicts_with = "contention_worker")]
    pub election_leader: bool,
}
