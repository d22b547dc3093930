//! The command-line syntax of `eventsource leader ...` (clap derive).
//! Apart from `cli.rs` so that the arguments import nothing of the
//! commands that run them.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::duration::{parse_duration, parse_interval, parse_lease, parse_timeout, parse_watchdog};
use crate::exit;

/// `eventsource leader ...`
#[derive(Debug, Subcommand)]
pub enum LeaderCommand {
    /// Run COMMAND while leading election NAME; stop it if leadership is lost.
    #[command(
        long_about = RUN_LONG_ABOUT,
        override_usage = "eventsource leader run [OPTIONS] <NAME> -- <COMMAND> [ARGS]..."
    )]
    Run(LeaderRunArgs),

    /// Show who leads election NAME (with --watch: every change, vacancies included).
    #[command(long_about = SHOW_LONG_ABOUT)]
    Show(LeaderShowArgs),
}

const RUN_LONG_ABOUT: &str = "Campaign in election NAME and run COMMAND while leading it. \
Candidates wait in arrival order; when the leader resigns (its COMMAND exits) or dies, the next \
one leads within milliseconds. COMMAND gets EVENTSOURCE_LEADER_NAME and EVENTSOURCE_LEADER_TERM \
(the term: a fencing token strictly greater than every earlier leader's, also exported as \
EVENTSOURCE_LOCK_FENCE). If leadership is lost while COMMAND runs, COMMAND's process group is \
stopped as in `lock run` and the tool exits with the lock-lost code (76). Needs `eventsource \
lock install` once per database (the fence table). The election is the advisory lock of key \
`election:NAME`; see docs/primitives.md for taking part from other languages.";

/// `eventsource leader run`
#[derive(Debug, Args)]
pub struct LeaderRunArgs {
    /// Give up after waiting DURATION to lead; without it, wait as long as it
    /// takes. With it, a wait whose session ends (a server restart, a
    /// failover) connects again and waits on; without it, that ends the
    /// wait (exit 69), as with `lock run`: a standby candidate that must
    /// outlive restarts passes a long --timeout (e.g. 100d) or is restarted
    /// by its supervisor.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, conflicts_with = "no_wait")]
    pub timeout: Option<Duration>,

    /// One attempt: if someone else leads, exit at once with the conflict code.
    #[arg(long)]
    pub no_wait: bool,

    /// A label for this candidate, shown by `leader show` (percent-encoded
    /// in pg_stat_activity outside printable ASCII, as for `lock run
    /// --holder-id`) [default: HOSTNAME:PID].
    #[arg(long, value_name = "ID", value_parser = crate::names::parse_holder_id)]
    pub holder_id: Option<String>,

    /// Exit code when leadership is not won.
    #[arg(long, value_name = "N", default_value_t = exit::CONFLICT,
          value_parser = clap::value_parser!(i32).range(0..=255))]
    pub conflict_exit_code: i32,

    /// Exit code when leadership is lost while COMMAND runs.
    #[arg(long, value_name = "N", default_value_t = exit::LOCK_LOST,
          value_parser = clap::value_parser!(i32).range(0..=255))]
    pub lost_exit_code: i32,

    /// After a loss, how long COMMAND's process group has between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub kill_grace: Duration,

    /// As `lock run --watchdog` [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = parse_watchdog)]
    pub watchdog: Option<Duration>,

    /// As `lock run --lease`: a frozen or cut-off leader loses leadership
    /// about DURATION after its last word with the server (a cut-off one
    /// stops COMMAND with SIGTERM, SIGKILL after --kill-grace cut to what
    /// remains of the lease, before the next leader can start).
    #[arg(long, value_name = "DURATION", value_parser = parse_lease)]
    pub lease: Option<Duration>,

    /// The election's name: one line of at most 131,041 bytes (COMMAND
    /// gets it in EVENTSOURCE_LOCK_KEY as election:NAME, and Linux caps one
    /// environment string at 128 KiB).
    #[arg(value_name = "NAME", value_parser = crate::names::parse_election_name)]
    pub name: String,

    /// The command to run while leading, and its arguments (after `--`).
    #[arg(value_name = "COMMAND", required = true, num_args = 1.., trailing_var_arg = true,
          allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

const SHOW_LONG_ABOUT: &str = "Show who leads election NAME and its term, read from the fence \
table (needs `eventsource lock install` once per database; without it, exit 78). With --watch, \
look every --every and print a line, starting with the look's time (RFC 3339, UTC), at every \
change of leader or term; terms that began and ended between two looks are reported as \
`skipped` lines (terms=FIRST..LAST), never silently missed; until SIGINT, SIGTERM or SIGHUP (exit 0).

A leader's line is NAME, `leader`, its holder id (the candidate's --holder-id, by default \
HOST:PID of its `leader run`), `server_pid=` (the PostgreSQL backend pid of the leader's \
session, for pg_stat_activity or pg_terminate_backend: not a pid of the candidate's host) \
and `term=`; in JSON, `pid` is that backend pid.";

/// `eventsource leader show`
#[derive(Debug, Args)]
pub struct LeaderShowArgs {
    /// Keep looking, and print a line at every change (a new leader, a new
    /// term, vacant, or terms skipped between looks), each with its time.
    #[arg(long)]
    pub watch: bool,

    /// How often --watch looks (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = parse_interval, requires = "watch", visible_alias = "interval")]
    pub every: Duration,

    /// Print JSON objects (one per line with --watch).
    #[arg(long)]
    pub json: bool,

    /// The election's name.
    #[arg(value_name = "NAME", value_parser = crate::names::parse_name)]
    pub name: String,
}
