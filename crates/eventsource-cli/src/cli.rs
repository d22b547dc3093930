//! Command-line syntax (clap derive) and help texts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::duration::{parse_duration, parse_nonzero, parse_timeout};

const ABOUT: &str = "Cross-process locks on PostgreSQL advisory locks, for operators";

const LONG_ABOUT: &str = "\
Cross-process locks on PostgreSQL advisory locks, for operators.

Keep a cron job, a migration or a tenant cutover from running twice across
hosts (`eventsource lock run`), see who holds what when something is stuck
(`eventsource lock holders`), and watch the locks at work on a throwaway
server (`eventsource demo`).

Locks are PostgreSQL session-level advisory locks in the database the URL
names; a string KEY maps to a 64-bit lock id (`eventsource lock key`), the
same id the eventsource library and its Python reference derive. A lock is
released when its holder releases it or when the holder's database session
ends, including when the holder crashes.";

const AFTER_HELP: &str = "\
Connection:
  --database-url, else the DATABASE_URL environment variable, in libpq URL
  form: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE...],
  or key=value form (host=... dbname=...). PGPASSWORD supplies the password
  when the URL has none. Passwords are never printed: every message shows
  them as ***. Prefer the environment to the option, which other users can
  read in `ps`. TLS: sslmode=disable|prefer|require|verify-ca|verify-full,
  and sslrootcert=PATH for the CA, as URL parameters.

Logging:
  EVENTSOURCE_LOG=debug (or info, trace, a tracing filter) logs to stderr,
  one line each, as `eventsource: LEVEL: ...`; colour only on a terminal and
  without NO_COLOR.

Output:
  A failed write to standard output (a full disk, a closed pipe) is
  reported on stderr and exits with 74.

Install:
  cargo install --locked --path crates/eventsource-cli; shell completions
  with `eventsource completions SHELL`, the manual page with `eventsource man`.";

const RUN_LONG_ABOUT: &str = "\
Acquire KEY, run COMMAND while holding it, release it when COMMAND and
every process it started have exited.

Waiting is fair: waiters get the lock in the order they asked for it. Without
--timeout the tool waits as long as it takes; with --timeout it gives up after
DURATION, and meanwhile retries (with backoff) a server that cannot be
reached yet; with --no-wait it makes a single attempt.

COMMAND runs as a child process with the tool's standard input, output and
error, and with two extra environment variables: EVENTSOURCE_LOCK_KEY (KEY)
and EVENTSOURCE_LOCK_ID (the decimal advisory-lock id).

The job: COMMAND starts in a process group of its own, which the processes
it starts join unless they leave it (setsid, setpgid). The lock is released
only after every process of the group has ended, so work that COMMAND leaves
running in the background keeps the lock held.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM sent
to the tool are forwarded to the job's process group. When the tool's stdin
is the terminal and it runs in the foreground, the terminal is handed to the
job, so a typed Ctrl-C reaches the job directly. While the tool still waits
for the lock, such a signal ends the wait and the tool exits with 128+N
without running COMMAND.

Lock loss: if the lock's database session ends while the job runs (backend
terminated, server restarted, network cut), the job's group gets SIGTERM,
then SIGKILL if it is still running after --kill-grace, and the tool exits
with the lock-lost code (76) and says why on stderr.

The tool dying or stopping: if the tool is killed (SIGKILL, out of memory),
COMMAND gets SIGKILL from the kernel (Linux) and a watchdog process sends
SIGKILL to the rest of the group. If the tool is stopped (SIGSTOP, a
debugger, swapped out), its watchdog kills the job's group once the tool has
not answered for --watchdog: the lock may be gone meanwhile, and the job
must not go on without it.";

const RUN_AFTER_HELP: &str = "\
Exit codes:
  COMMAND's code  COMMAND ran under the lock and exited (0 = success)
  128+N           COMMAND died of signal N (e.g. 137 for SIGKILL), or the tool
                  was interrupted by signal N while waiting for the lock
  2               bad usage (unknown option, bad DURATION, bad or missing URL);
                  nothing was connected to
  69              the database could not be reached, failed, or did not
                  answer within --timeout
  70              internal error
  75              not acquired: KEY is held elsewhere (--no-wait) or --timeout
                  elapsed in the server's queue; stderr names the holder when
                  visible (--conflict-exit-code changes it)
  76              the lock was lost while COMMAND ran, or the tool was stopped
                  longer than --watchdog; the job was stopped
                  (--lost-exit-code changes it)
  77              the server cancelled the wait (pg_cancel_backend,
                  statement_timeout); COMMAND did not run
  126             COMMAND could not be executed
  127             COMMAND was not found

Examples:
  # A cron job that must not overlap itself on any host; skip quietly if busy:
  eventsource lock run --no-wait --conflict-exit-code 0 nightly-report -- /opt/report.sh
  # A deploy step: wait up to 10 minutes for the other deploy to finish:
  eventsource lock run --timeout 10m deploy:shop -- ./migrate.sh --apply

DURATION: a number and a unit (ns, us, ms, s, m, h, d), e.g. 500ms, 30s,
1.5s, 2m, 1h30m. Negative values, units left out, nan and inf are refused.";

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
    /// PostgreSQL URL (postgres://user:pass@host:port/db); defaults to
    /// $DATABASE_URL. The password is never printed.
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
    Man,
}

const COMPLETIONS_LONG_ABOUT: &str = "\
Print a completion script for SHELL on standard output. For example:
  eventsource completions bash > /etc/bash_completion.d/eventsource
  eventsource completions zsh > \"${fpath[1]}/_eventsource\"
  eventsource completions fish > ~/.config/fish/completions/eventsource.fish";

const MAN_LONG_ABOUT: &str = "\
Print the manual page of eventsource (roff) on standard output. For example:
  eventsource man > /usr/local/share/man/man1/eventsource.1
  eventsource man | man -l -";

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
    #[command(long_about = HOLDERS_LONG_ABOUT)]
    Holders(HoldersArgs),

    /// Check that the database really gives session advisory locks.
    #[command(long_about = DOCTOR_LONG_ABOUT)]
    Doctor,
}

const DOCTOR_LONG_ABOUT: &str = "\
Check once that the database really gives session-level advisory locks.

Two sessions, opened as `lock run` opens them, take one random test key:
the first must keep its server session (backend pid) from one statement to
the next and see its lock in pg_locks; the second must run on another
server session and be refused the key, then get it once the first lets go.

This catches what silently breaks session locks while every call succeeds:
a transaction-mode pooler (PgBouncer with pool_mode = transaction) and
engines whose advisory functions lock nothing (CockroachDB). On success it
prints the server version, the lock table's size and the settings that
bound how long a vanished or frozen holder keeps its locks, with advice.

It also fails on a hot standby (pg_is_in_recovery(): its locks do not
exclude holders on the primary), exercises every advisory function the lock
manager calls (the blocking wait included, pg_catalog-qualified as the
manager calls them), and warns about look-alike functions outside
pg_catalog that would fool clients calling them unqualified.

Exit code: 0 when the checks pass (warnings are advice), 1 when the server
fails a check (the message names the cause), 69 when it cannot be reached,
74 when the report cannot be written.";

/// `eventsource lock run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Give up after waiting DURATION for the lock (e.g. 30s, 500ms, 2m);
    /// without it, wait as long as it takes.
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
    /// pg_stat_activity as application_name `eventsource/ID`
    /// [default: HOSTNAME:PID].
    #[arg(long, value_name = "ID")]
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

    /// After a lock loss, how long COMMAND has between SIGTERM and SIGKILL
    /// (0s: SIGKILL at once).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration,
        allow_hyphen_values = true
    )]
    pub kill_grace: Duration,

    /// If the tool itself stops answering for DURATION (stopped with
    /// SIGSTOP, traced, starved), its watchdog process kills COMMAND's
    /// process group with SIGKILL.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "2s",
        value_parser = parse_nonzero,
        allow_hyphen_values = true
    )]
    pub watchdog: Duration,

    /// The lock key (any string up to 4096 bytes).
    #[arg(value_name = "KEY")]
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
}

const KEY_LONG_ABOUT: &str = "\
Print the advisory-lock id of each KEY, one line per key: KEY, a tab, the
decimal lock id. Needs no database.

The id is the first 8 bytes of SHA-256(KEY), big-endian, with the top bit
cleared: the id that `lock run`, the eventsource library and its Python
reference use, and that pg_locks shows as (classid << 32) | objid. Use it to
find a lock in pg_locks, or to take the same lock from SQL:
SELECT pg_advisory_lock(LOCK_ID).

Control characters in a key (tab, newline, ...) are printed escaped (\\t, \\n).";

/// `eventsource lock key`
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The keys.
    #[arg(value_name = "KEY", required = true)]
    pub keys: Vec<String>,
}

const HOLDERS_LONG_ABOUT: &str = "\
List the advisory locks of the database, or only those of the given KEYs:
for each lock its id, its key when given on the command line, and each
session that holds it or waits for it, waiters in queue order. Without KEYs
both forms are listed: bigint locks (as eventsource takes them), then
two-int locks, pg_advisory_lock(int, int), shown as (K1,K2).

For each session: state (held / waiting), lock mode, backend pid,
holder id (from application_name `eventsource/ID`) or application_name,
client address, and since when: for a waiter when it started waiting; for a
holder when its session was last active (PostgreSQL does not record when a
lock was granted).

`SELECT pg_terminate_backend(PID)` ends a session and frees its locks.

Sessions of other database roles show fewer details unless the connecting
role has pg_read_all_stats.";

/// `eventsource lock holders`
#[derive(Debug, Args)]
pub struct HoldersArgs {
    /// Print JSON (an array of locks with `holders` and `waiters`) instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Only the locks of these keys (default: every advisory lock).
    #[arg(value_name = "KEY")]
    pub keys: Vec<String>,
}

const DEMO_LONG_ABOUT: &str = "\
Watch the locks at work.

Without a database URL (--database-url or DATABASE_URL), the demo boots a
throwaway PostgreSQL from the installed server binaries (initdb, pg_ctl) in a
temporary directory and removes it at the end. With a URL it uses that
database, with keys of its own (demo:RUN:k0, ...) that no one else takes.

It starts --workers worker processes (this same program) that acquire one of
--keys keys at random, spend a few milliseconds in a critical section, and
release it, for --seconds. A status line on stderr shows acquisitions, the
current holder of each key and how many wait for it. Half-way through, one
worker stops inside its critical section and the demo kills it with SIGKILL:
PostgreSQL releases its lock when the connection drops, and the next waiter
takes over.

Every worker appends the times it enters and leaves a critical section to a
shared record. The summary at the end counts acquisitions, checks the record
for overlapping critical sections on one key (there must be none), and
reports the hand-over latency (from one holder leaving to the next waiter
entering) at p50 and p99.

Exit code: 0 when no overlap was found and every worker ended normally
(except the one killed), 1 otherwise, 2 on bad usage, 69 when the database
could not be reached or started, 130/143 when interrupted.";

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
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("eventsource").chain(args.iter().copied()))
    }

    fn run_args(args: &[&str]) -> RunArgs {
        match parse(args).unwrap().command {
            Command::Lock(LockCommand::Run(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_command_after_double_dash_or_directly() {
        let r = run_args(&[
            "lock",
            "run",
            "--timeout",
            "30s",
            "k",
            "--",
            "sh",
            "-c",
            "exit 3",
        ]);
        assert_eq!(r.key, "k");
        assert_eq!(r.timeout, Some(Duration::from_secs(30)));
        assert_eq!(r.command, vec!["sh", "-c", "exit 3"]);
        let r = run_args(&["lock", "run", "k", "ls", "-l", "--timeout", "1s"]);
        assert_eq!(r.timeout, None, "options after COMMAND belong to COMMAND");
        assert_eq!(r.command, vec!["ls", "-l", "--timeout", "1s"]);
        assert_eq!(r.conflict_exit_code, 75);
        assert_eq!(r.lost_exit_code, 76);
        assert_eq!(r.kill_grace, Duration::from_secs(10));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["lock", "run", "--timeout", "-1s", "k", "--", "true"][..],
            &["lock", "run", "--timeout=-1s", "k", "--", "true"],
            &["lock", "run", "--timeout", "0s", "k", "--", "true"],
            &["lock", "run", "--timeout", "nan", "k", "--", "true"],
            &["lock", "run", "--timeout", "ten", "k", "--", "true"],
            &["lock", "run", "--timeout", "30", "k", "--", "true"],
            &["lock", "run", "--kill-grace", "-5s", "k", "--", "true"],
            &[
                "lock",
                "run",
                "--no-wait",
                "--timeout",
                "1s",
                "k",
                "--",
                "true",
            ],
            &[
                "lock",
                "run",
                "--conflict-exit-code",
                "256",
                "k",
                "--",
                "true",
            ],
            &[
                "lock",
                "run",
                "--conflict-exit-code",
                "-1",
                "k",
                "--",
                "true",
            ],
            &["lock", "run", "k"],
            &["lock", "key"],
            &["demo", "--workers", "1"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?}"));
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
        let r = run_args(&["lock", "run", "--kill-grace", "0s", "k", "--", "true"]);
        assert_eq!(r.kill_grace, Duration::ZERO);
    }

    #[test]
    fn database_url_is_global() {
        let cli = parse(&["lock", "holders", "--database-url", "postgres://x@h/d"]).unwrap();
        assert_eq!(cli.database_url.as_deref(), Some("postgres://x@h/d"));
        let cli = parse(&["--database-url", "postgres://y@h/d", "lock", "holders"]).unwrap();
        assert_eq!(cli.database_url.as_deref(), Some("postgres://y@h/d"));
    }
}
