//! `eventsource lock run`'s arguments (also built by `leader run` and
//! `lock run --permits`).

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;

use crate::duration::{
    parse_duration, parse_lease, parse_min_interval, parse_timeout, parse_watchdog,
};

/// `--watchdog`'s default: the lock manager's liveness timeout, the
/// longest the tool itself waits on a liveness ping.
pub const DEFAULT_WATCHDOG: &str = "2s";
/// The same, in milliseconds.
pub const DEFAULT_WATCHDOG_MS: u64 = 2000;

/// `eventsource lock run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Give up after waiting DURATION for the lock (e.g. 30s, 500ms, 2m);
    /// without it, wait as long as it takes. A server that goes silent
    /// during the wait gets one second more to answer (then exit 69).
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_timeout,
        allow_hyphen_values = true,
        conflicts_with = "no_wait"
    )]
    pub timeout: Option<Duration>,

    /// Make one attempt; if KEY is held elsewhere, exit at once with the
    /// conflict code.
    #[arg(long)]
    pub no_wait: bool,

    /// A label for this holder, shown by `lock holders` and in
    /// pg_stat_activity as application_name `eventsource/ID`, where bytes
    /// outside printable ASCII and `%` are percent-encoded (`é` as
    /// `%C3%A9`: PostgreSQL would show them as `?`); PostgreSQL keeps 63
    /// bytes of it, so a longer ID keeps its first and last 24 bytes or so
    /// around `..` [default: HOSTNAME:PID].
    #[arg(long, value_name = "ID", value_parser = crate::names::parse_holder_id)]
    pub holder_id: Option<String>,

    /// Exit code when the lock is not acquired.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::exit::CONFLICT,
        value_parser = clap::value_parser!(i32).range(0..=255)
    )]
    pub conflict_exit_code: i32,

    /// Exit code when the lock is lost while COMMAND runs.
    #[arg(
        long,
        value_name = "N",
        default_value_t = crate::exit::LOCK_LOST,
        value_parser = clap::value_parser!(i32).range(0..=255)
    )]
    pub lost_exit_code: i32,

    /// After a lock loss, how long the job (COMMAND's whole process group)
    /// has between SIGTERM and SIGKILL (0s: SIGKILL at once); cut, when
    /// the server went silent, to what remains before it may free the lock
    /// (its TCP timeouts, about 15 s, or --lease).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration,
        allow_hyphen_values = true
    )]
    pub kill_grace: Duration,

    /// Lock even when the server is a hot standby (in recovery). Its
    /// advisory locks exclude only that standby's own sessions, not holders
    /// on the primary: for a deliberately standby-only job.
    #[arg(long)]
    pub allow_standby: bool,

    /// If the tool itself stops answering for DURATION (stopped with
    /// SIGSTOP, traced, starved), its watchdog process kills COMMAND's
    /// process group with SIGKILL (at least 100ms).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = DEFAULT_WATCHDOG,
        value_parser = parse_watchdog,
        allow_hyphen_values = true
    )]
    pub watchdog: Duration,

    /// Fencing: take a fencing token with the lock (strictly greater than
    /// every earlier holder's) and give it to COMMAND as
    /// EVENTSOURCE_LOCK_FENCE, for its writes to be checked against (needs
    /// `eventsource lock install` once).
    #[arg(long)]
    pub fence: bool,

    /// Lease mode: if this tool stops talking to the server (frozen,
    /// cut off), the server frees the lock about DURATION after its last
    /// statement (1s to 24d; PostgreSQL 14+), and the tool counts the
    /// lock lost before that. Also bounds --watchdog to half of DURATION.
    /// A tool cut off but running stops COMMAND with SIGTERM and SIGKILL
    /// after --kill-grace cut to what remains of the lease, so that COMMAND
    /// has ended before the server can free the lock.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_lease,
        allow_hyphen_values = true
    )]
    pub lease: Option<Duration>,

    /// KEY names a semaphore of N permits: run COMMAND holding one of
    /// them (EVENTSOURCE_LOCK_PERMIT says which, 0 to N-1), so that at most
    /// N such commands run at once. Every user of KEY must pass the same N.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=pgcoord::coordination::MAX_PERMITS as i64),
        conflicts_with = "fence"
    )]
    pub permits: Option<u32>,

    /// Hold KEY in shared mode: any number of shared runs of KEY at once,
    /// none while an exclusive run holds it. Waiting stays first come,
    /// first served across both modes, so a queued exclusive run is never
    /// passed by later shared ones. COMMAND gets EVENTSOURCE_LOCK_MODE=shared.
    #[arg(long, conflicts_with_all = ["permits", "fence", "also", "min_interval"])]
    pub shared: bool,

    /// Hold this key too (repeatable): COMMAND runs holding KEY and every
    /// --also key at once. The set is taken all or none, under one
    /// --timeout (--no-wait: one attempt of the whole set), in an order that
    /// keeps runs with overlapping sets from deadlocking; losing any key
    /// stops the job. COMMAND also gets EVENTSOURCE_LOCK_KEYS (a JSON array)
    /// and EVENTSOURCE_LOCK_IDS (space-separated).
    #[arg(long, value_name = "KEY", conflicts_with = "permits", value_parser = crate::names::parse_key)]
    pub also: Vec<String>,

    /// At most one run per DURATION: once the lock is held, COMMAND runs
    /// only if no run of KEY (with --also: of any key of the set; with
    /// --permits: of the semaphore) started within DURATION before, by the
    /// database server's clock; otherwise it is skipped with the conflict
    /// exit code. The start is recorded before COMMAND starts, so a crash
    /// still counts; one of a COMMAND that could not be started (126, 127)
    /// is taken back (needs `eventsource lock install`).
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_min_interval,
        allow_hyphen_values = true
    )]
    pub min_interval: Option<Duration>,

    /// The lock key: any non-empty string of UTF-8 up to 131,050 bytes
    /// (COMMAND gets it in EVENTSOURCE_LOCK_KEY, and Linux caps one
    /// environment string at 128 KiB; the library takes up to 1 MiB); only
    /// its 64-bit hash reaches the server.
    #[arg(value_name = "KEY", value_parser = crate::names::parse_key)]
    pub key: String,

    /// The command to run, and its arguments (after `--`).
    #[arg(
        value_name = "COMMAND",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,

    /// More environment for COMMAND, set by subcommands built on `lock
    /// run` (`leader run`): fixed values, and names that also receive the
    /// fencing token.
    #[arg(skip)]
    pub extra_env: Vec<(&'static str, String)>,
    #[arg(skip)]
    pub fence_env: Vec<&'static str>,
    /// The subcommand built on `lock run` (`leader run`), for its
    /// messages: it turned --fence on for the user, and offers no
    /// --allow-standby.
    #[arg(skip)]
    pub built_for: Option<&'static str>,
}
