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
    /// The default run: 8 interleaved rounds of 1.5 s per scenario.
    #[arg(long)]
    pub quick: bool,
    /// Run only these scenarios (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Override the measured seconds per scenario and round.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Override the number of interleaved rounds.
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Run the read-model scenarios (PostgreSQL and SQLite) instead of the lock ones.
    #[arg(long)]
    pub readmodels: bool,
    /// Experiment: shared sessions per manager (the builder's `shared_sessions`);
    /// default: the manager's own default.
    #[arg(long)]
    pub shared_sessions: Option<usize>,
    /// Internal: run as one worker process of the `contention` scenario
    /// (its spec as JSON); prints its results as one JSON line.
    #[arg(long, hide = true)]
    pub contention_worker: Option<String>,
}
