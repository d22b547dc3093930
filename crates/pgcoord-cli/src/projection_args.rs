//! The command-line syntax of `eventsource projection ...` (clap derive).
//! Apart from `cli.rs` so that the arguments import nothing of the
//! commands that run them.

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::duration::parse_duration;

/// `eventsource projection ...`
#[derive(Debug, Subcommand)]
pub enum ProjectionCommand {
    /// How far behind projection NAME is: checkpoint, head, lag, rate, runner.
    #[command(long_about = STATUS_LONG_ABOUT)]
    Status(ProjectionStatusArgs),
}

const STATUS_LONG_ABOUT: &str = "Show how far behind projection NAME is, from the read-model \
database (--database-url): its committed checkpoint and when it last moved; with \
--events-table, the event table's head, the lag in events and in seconds (how long the oldest \
event not applied yet has waited) and an estimated time to catch up; the events applied per \
second over about the last minute (from the runner's checkpoint samples); the runner holding \
the projection's lock (`projection:NAME`: its holder label, host and pid, server pid, address \
and since when); and the number of parked events when a dead-letter table exists. On a \
terminal, a progress bar with the ETA is drawn on standard error while the projection is \
behind. Exit codes: 0 shown, 2 bad arguments, 69 database unreachable.";

/// `eventsource projection status`
#[derive(Debug, Args)]
pub struct ProjectionStatusArgs {
    /// The event table the projection reads (a PostgresEventTable), for the head and the lag.
    #[arg(long, value_name = "TABLE")]
    pub events_table: Option<String>,

    /// Print JSON (one object per line with --watch).
    #[arg(long)]
    pub json: bool,

    /// Keep looking: a line per --every on standard output (and the bar on a terminal).
    #[arg(long)]
    pub watch: bool,

    /// How often --watch looks.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub every: Duration,

    /// The projection's name (its checkpoint's and runner lock's).
    #[arg(value_name = "NAME")]
    pub name: String,
}
