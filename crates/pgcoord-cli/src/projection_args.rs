//! The command-line syntax of `eventsource projection ...` (clap derive).
//! Apart from `cli.rs` so that the arguments import nothing of the
//! commands that run them.

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::duration::parse_interval;

/// `eventsource projection ...`
#[derive(Debug, Subcommand)]
pub enum ProjectionCommand {
    /// How far behind projection NAME is: checkpoint, head, lag, rate, runner.
    #[command(long_about = STATUS_LONG_ABOUT)]
    Status(ProjectionStatusArgs),
    /// Parked (dead-letter) events of a projection: list, show, replay, drop.
    #[command(subcommand, long_about = DLQ_LONG_ABOUT)]
    Dlq(DlqCommand),
}

const DLQ_LONG_ABOUT: &str = "The events a projection's runner parked in the dead-letter table \
(eventsource_projection_dead_letters) instead of applying them: a handler that kept failing on \
them after the retry policy's attempts, or an earlier parked event of their partition they are \
held behind. `list` and `show` read them (--json for JSON); `drop` removes them without applying \
them; `replay` marks them for replay by the projection's runner, which applies them through its \
handler (the tool does not know the handler) before its next batch, or when it starts, and \
removes them. `replay` and `drop` take POSITIONs or --all. Without --yes, `drop` asks first when \
standard input is a terminal (the question goes to the terminal), and never otherwise; it drops \
exactly the events it counted in its question. A database where no dead-letter table is visible \
(none parked yet, another database, or a role that cannot see the table) has no parked events, \
and a line on standard error says which database and role were read. Each query is given 30 s \
to be answered. Exit codes: 0 done, 1 not done: a POSITION given is not parked (the others were \
acted on) or `drop` was declined, 2 bad arguments, 69 the database could not be reached, failed \
the query (the server's message says why) or did not answer, 78 the role lacks a privilege the \
command needs (permission denied).";

/// `eventsource projection dlq ...`
#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// The parked events of projection NAME, by position.
    List(DlqListArgs),
    /// One parked event in full: error, attempts, times, payload.
    Show(DlqShowArgs),
    /// Mark parked events for replay by the projection's runner (through its handler).
    Replay(DlqChangeArgs),
    /// Remove parked events without applying them.
    Drop(DlqDropArgs),
}

/// `eventsource projection dlq list`
#[derive(Debug, Args)]
pub struct DlqListArgs {
    /// Print JSON (an array of objects).
    #[arg(long)]
    pub json: bool,

    /// The projection's name.
    #[arg(value_name = "NAME", value_parser = crate::names::parse_name)]
    pub name: String,
}

/// `eventsource projection dlq show`
#[derive(Debug, Args)]
pub struct DlqShowArgs {
    /// Print JSON (one object).
    #[arg(long)]
    pub json: bool,

    /// The projection's name.
    #[arg(value_name = "NAME", value_parser = crate::names::parse_name)]
    pub name: String,

    /// The parked event's position.
    #[arg(value_name = "POSITION")]
    pub position: i64,
}

/// `eventsource projection dlq replay` (and `drop`'s selection)
#[derive(Debug, Args)]
#[command(
    override_usage = "eventsource projection dlq replay [OPTIONS] <NAME> <POSITION>...|--all"
)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["positions", "all"]))]
pub struct DlqChangeArgs {
    /// Every parked event of the projection.
    #[arg(long)]
    pub all: bool,

    /// Print JSON (one object with the count).
    #[arg(long)]
    pub json: bool,

    /// The projection's name.
    #[arg(value_name = "NAME", value_parser = crate::names::parse_name)]
    pub name: String,

    /// The parked events' positions (or --all).
    #[arg(value_name = "POSITION")]
    pub positions: Vec<i64>,
}

/// `eventsource projection dlq drop`
#[derive(Debug, Args)]
#[command(override_usage = "eventsource projection dlq drop [OPTIONS] <NAME> <POSITION>...|--all")]
pub struct DlqDropArgs {
    /// Do not ask on a terminal (nothing is asked otherwise).
    #[arg(long, short = 'y')]
    pub yes: bool,

    #[command(flatten)]
    pub which: DlqChangeArgs,
}

const STATUS_LONG_ABOUT: &str = "Show how far behind projection NAME is, from the read-model \
database (--database-url): its committed checkpoint and when it last moved; with \
--events-table, the event table's head, the lag in events and in seconds (how long the oldest \
event not applied yet has waited) and an estimated time to catch up; the events applied per \
second over about the last minute (from the runner's checkpoint samples); the runner holding \
the projection's lock (`projection:NAME`: its holder label, host and pid, server pid, address \
and when its session was last active, which is not when it took the lock; on a hot standby, whose advisory locks are its own sessions' only, \
\"unknown on a standby\" and a warning on standard error); and the number of parked events \
(`projection dlq`; 0 before the dead-letter table exists). When events wait and neither the \
checkpoint nor the oldest waiting event has moved for 15 s, it says since when the projection \
is stalled and gives no ETA. For the base name of a segmented projection \
(`NAME/segment-I-of-N` checkpoints), each segment's line and a total. On a terminal, a progress bar with the ETA is drawn on standard error while the projection is \
behind. A database where no checkpoint table is visible (no projection ran there, another \
database, or a role that cannot see the table) shows no checkpoint, and a line on standard error \
says which database and role were read. Each look is given 30 s to be answered. Exit codes: 0 \
shown (and --watch ended by SIGINT, SIGTERM or SIGHUP), 2 bad arguments, 69 the database could not be reached, failed the query (the server's \
message says why) or did not answer, 78 the --events-table is not in the database or the role \
lacks a privilege the look needs (permission denied).";

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

    /// How often --watch looks (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_interval, requires = "watch")]
    pub every: Duration,

    /// The projection's name (its checkpoint's and runner lock's).
    #[arg(value_name = "NAME", value_parser = crate::names::parse_name)]
    pub name: String,
}
