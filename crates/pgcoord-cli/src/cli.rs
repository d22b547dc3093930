//! Command-line syntax (clap derive) and help texts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::help::{
    ABOUT, AFTER_HELP, COMPLETIONS_LONG_ABOUT, DEMO_LONG_ABOUT, DOCTOR_LONG_ABOUT,
    HOLDERS_LONG_ABOUT, KEY_LONG_ABOUT, LONG_ABOUT, MAN_LONG_ABOUT, RUN_AFTER_HELP, RUN_LONG_ABOUT,
};

pub use crate::run_args::{RunArgs, DEFAULT_WATCHDOG_MS};

/// The `eventsource` command.
#[derive(Debug, Parser)]
#[command(
    name = "eventsource",
    version = crate::VERSION,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// PostgreSQL URL (postgres://user:pass@host:port/db) or key=value
    /// string; defaults to $DATABASE_URL, else libpq's environment alone
    /// (PGHOST, PGUSER, PGDATABASE, ~/.pgpass, PGSERVICE, ...). The
    /// password is never printed.
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL"
    )]
    pub database_url: Option<String>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// What `demo --help` says of `--database-url`: without a URL the demo
/// starts a cluster of its own instead of reading libpq's environment
/// alone (PGHOST, ...), as the other commands do.
const DEMO_URL_HELP: &str = "PostgreSQL URL (postgres://user:pass@host:port/db) or key=value \
string of the database to run the demo in (libpq's environment fills what it leaves out); \
defaults to $DATABASE_URL. Without one the demo starts a throwaway PostgreSQL of its own: \
libpq's environment alone (PGHOST, PGSERVICE, ...) does not choose a server for it. The password \
is never printed";

/// The command-line definition: the derived one, but for `demo`, whose
/// `--database-url` (a global option) says what the demo does without one.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let url = cmd
        .get_arguments()
        .find(|a| a.get_id() == "database_url")
        .expect("--database-url is defined")
        .clone()
        .help(DEMO_URL_HELP)
        .long_help(DEMO_URL_HELP);
    // A subcommand's own argument of the same id is not overwritten by the
    // global one, and its value is shared with it as the global's would be.
    cmd.mut_subcommand("demo", |demo| demo.arg(url))
}

/// Parses the command line as `Cli::try_parse` does, with [`command`].
pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let mut matches = command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command()))?;
    match &mut cli.command {
        Command::Lock(LockCommand::Run(args)) => drop_separator(&mut args.command),
        Command::Leader(crate::leader_args::LeaderCommand::Run(args)) => {
            drop_separator(&mut args.command)
        }
        _ => {}
    }
    Ok(cli)
}

/// A KEY (or NAME) that begins with `-` is written after a `--` (`lock run
/// -- -key -- COMMAND`); the `--` that then follows it, as in every other
/// `KEY -- COMMAND`, separates and is not COMMAND's program.
fn drop_separator(command: &mut Vec<std::ffi::OsString>) {
    if command.len() > 1 && command[0] == "--" {
        command.remove(0);
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command under a lock, derive lock ids, list lock holders.
    #[command(subcommand)]
    Lock(LockCommand),

    /// Watch the locks at work: worker processes contending for a few keys,
    /// one of them killed while holding a lock.
    #[command(long_about = DEMO_LONG_ABOUT)]
    Demo(DemoArgs),

    /// One worker process of `eventsource demo` (internal).
    #[command(hide = true)]
    DemoWorker(WorkerArgs),

    /// The watchdog of `lock run` (internal; see `lock run --help`).
    #[command(hide = true)]
    Watchdog(WatchdogArgs),

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(long_about = COMPLETIONS_LONG_ABOUT)]
    Completions(CompletionsArgs),

    /// Print the manual page (roff) on standard output.
    #[command(long_about = MAN_LONG_ABOUT)]
    Man(ManArgs),

    /// Leader election: run a command while leading, show who leads.
    #[command(subcommand)]
    Leader(crate::leader_args::LeaderCommand),

    /// Read-model projections: how far behind one is (status), its parked events (dlq).
    #[command(subcommand)]
    Projection(crate::projection_args::ProjectionCommand),
}

/// `eventsource man`
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print, as typed (`lock run`); none:
    /// the page of eventsource itself.
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `eventsource completions`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `eventsource watchdog` (internal; its pipe is its standard input).
#[derive(Debug, Args)]
pub struct WatchdogArgs {
    /// Kill the command's process group after this many milliseconds
    /// without a heartbeat.
    #[arg(long)]
    pub bound_ms: u64,
}

/// `eventsource lock ...`
#[derive(Debug, Subcommand)]
pub enum LockCommand {
    /// Run COMMAND while holding KEY; release when it exits.
    #[command(
        long_about = RUN_LONG_ABOUT,
        after_long_help = RUN_AFTER_HELP,
        override_usage = "eventsource lock run [OPTIONS] <KEY> -- <COMMAND> [ARGS]..."
    )]
    Run(RunArgs),

    /// Print the advisory-lock id of each KEY (KEY, a tab, LOCK_ID); needs no database.
    #[command(long_about = KEY_LONG_ABOUT)]
    Key(KeyArgs),

    /// List the advisory locks of the database: holders and waiters.
    #[command(long_about = HOLDERS_LONG_ABOUT, after_long_help = crate::live::args::HOLDERS_AFTER_HELP)]
    Holders(HoldersArgs),

    /// A live view of the advisory locks, refreshed every second: who
    /// holds which key, who waits and for how long (q quits).
    #[command(long_about = crate::live::args::TOP_LONG_ABOUT)]
    Top(crate::live::args::TopArgs),

    /// Check that the database really gives session advisory locks.
    #[command(long_about = DOCTOR_LONG_ABOUT)]
    Doctor,

    /// Create the fencing table and its SQL check functions (for --fence); idempotent.
    #[command(long_about = INSTALL_LONG_ABOUT)]
    Install,

    /// Measure locks on this server: pairs/s, hand-over latency, fenced grants, lock-table room.
    #[command(long_about = crate::bench::BENCH_LONG_ABOUT)]
    Bench(crate::bench::BenchArgs),
}

const INSTALL_LONG_ABOUT: &str = "Create, once per database, what `lock run --fence` needs: the \
table eventsource_lock_fences (the last fencing token per lock id) and the SQL functions \
eventsource_lock_id(key), eventsource_lock_fence_check(lock_id, token), \
eventsource_lock_fence_check_key(key, token), eventsource_lock_claim_run(lock_ids, keys, \
interval_us) (the run log of --min-interval) and eventsource_lock_epoch() (the server's WAL \
timeline, part of every token so that tokens never repeat across a failover; SECURITY DEFINER, \
so the roles that lock need no WAL privileges), in the connection's current schema. Safe to run \
again and concurrently (run it again after upgrading); run by a role that may not change what \
another role installed, it says whether that is up to date (exit 0) or names the owner who must \
upgrade it (exit 78). Exit 78 too when the database or role lacks what the install needs (no \
schema of the search_path exists, no CREATE privilege, a read-only session); 69 when the \
database cannot be reached. Nothing else ever creates tables in your database.";

/// `eventsource lock key`
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The keys.
    #[arg(value_name = "KEY", required = true)]
    pub keys: Vec<String>,
}

/// `eventsource lock holders`
#[derive(Debug, Args)]
pub struct HoldersArgs {
    /// Print JSON (an array of locks with `holders` and `waiters`) instead of a table;
    /// with --watch, one JSON object per line and event.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub watch: crate::live::args::WatchArgs,

    /// Only the locks of these keys (default: every advisory lock).
    #[arg(value_name = "KEY", value_parser = crate::names::parse_key)]
    pub keys: Vec<String>,
}

/// `eventsource demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of worker processes.
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub workers: u32,

    /// How long the workers run, in seconds.
    #[arg(long, value_name = "S", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=600))]
    pub seconds: u32,

    /// Number of keys the workers contend for.
    #[arg(long, value_name = "K", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub keys: u32,
}

/// `eventsource demo-worker` (internal; the URL comes in DATABASE_URL).
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The worker's number.
    #[arg(long)]
    pub id: u32,
    /// Key prefix; keys are PREFIX0 .. PREFIX{keys-1}.
    #[arg(long)]
    pub prefix: String,
    /// Number of keys.
    #[arg(long)]
    pub keys: u32,
    /// Run time in milliseconds.
    #[arg(long)]
    pub millis: u64,
    /// The shared enter/exit record (appended to).
    #[arg(long)]
    pub record: PathBuf,
    /// Stop inside the first critical section entered after this many
    /// milliseconds, and wait to be killed.
    #[arg(long)]
    pub stall_after_ms: Option<u64>,
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
