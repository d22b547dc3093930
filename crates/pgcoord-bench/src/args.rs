//! Command line of the bench (and of its hidden worker mode).

use std::path::PathBuf;

use clap::Parser;

use crate::scenarios::{COORDINATION, ON_REQUEST, OTHERS, THROUGHPUT};

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
    #[arg(long, value_parser = positive_seconds)]
    pub sweep_seconds: Option<f64>,
    /// Override the measured seconds per scenario and round (more than 0).
    #[arg(long, value_parser = positive_seconds)]
    pub seconds: Option<f64>,
    /// Override the number of interleaved rounds (at least 1).
    #[arg(long, value_parser = at_least_one)]
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

/// A number of seconds above 0 (a window of 0 s measures nothing).
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err("must be a number of seconds above 0".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// A count of at least 1.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The names `--only` takes: every scenario, and the groups.
pub fn only_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = THROUGHPUT
        .iter()
        .chain(OTHERS.iter())
        .chain(ON_REQUEST.iter())
        .chain(COORDINATION.iter())
        .copied()
        .chain(["sweep", "coordination", "metrics"])
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

impl Args {
    /// What clap cannot check by itself, before anything runs: the names
    /// of `--only`, and that `--json`'s directory exists. Err: the usage
    /// error's message.
    pub fn check(&self) -> Result<(), String> {
        let valid = only_names();
        let unknown: Vec<&str> = self
            .only
            .iter()
            .map(String::as_str)
            .filter(|o| !valid.contains(o))
            .collect();
        if !unknown.is_empty() && !self.readmodels {
            return Err(format!(
                "unknown scenario(s) for --only: {}; valid: {}",
                unknown.join(", "),
                valid.join(", ")
            ));
        }
        if let Some(path) = &self.json {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            if !dir.is_dir() {
                return Err(format!(
                    "--json {}: the directory {} does not exist",
                    path.display(),
                    dir.display()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("pgcoord-bench").chain(args.iter().copied()))
    }

    #[test]
    fn an_unknown_scenario_is_named_with_the_valid_ones() {
        let e = parse(&["--only", "raw_seq,nosuch"])
            .unwrap()
            .check()
            .unwrap_err();
        assert!(
            e.starts_with("unknown scenario(s) for --only: nosuch; valid: "),
            "{e}"
        );
        assert!(
            e.contains("valid: ") && e.contains("ours_seq") && e.contains("sweep"),
            "{e}"
        );
        for ok in [
            "raw_seq",
            "coordination",
            "sweep",
            "failover",
            "election_failover",
        ] {
            parse(&["--only", ok]).unwrap().check().unwrap();
        }
    }

    #[test]
    fn zero_seconds_and_zero_rounds_are_refused() {
        for bad in [
            &["--seconds", "0"][..],
            &["--seconds", "-1"],
            &["--seconds", "NaN"],
            &["--sweep-seconds", "0"],
            &["--rounds", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let a = parse(&["--seconds", "0.2", "--rounds", "2"]).unwrap();
        assert_eq!((a.seconds, a.rounds), (Some(0.2), Some(2)));
    }

    #[test]
    fn a_json_path_in_a_missing_directory_is_refused() {
        let e = parse(&["--json", "/nonexistent-bench-dir/r.json"])
            .unwrap()
            .check()
            .unwrap_err();
        assert!(e.contains("/nonexistent-bench-dir/r.json"), "{e}");
        parse(&["--json", "r.json"]).unwrap().check().unwrap();
    }
}
