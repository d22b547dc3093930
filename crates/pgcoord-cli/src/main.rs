//! `eventsource`: run a command under a PostgreSQL advisory lock, inspect
//! lock holders, and a live demo. See `eventsource --help` and the README.
//!
//! The tool adds no lock logic of its own: locks come from
//! `pgcoord::PostgresLockManager`, the inspection from
//! `query_holders`. What it adds is process supervision (signals, exit
//! codes, lock loss) and output.

// The exceptions are the `pre_exec` hook that sets up COMMAND's process
// (see `job::spawn`) and borrowing raw file descriptors that stay open.
#![deny(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms)]

// Process supervision rests on Linux's prctl (the parent-death signal, the
// child subreaper): say so instead of failing on a missing function.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "the `eventsource` tool (pgcoord-cli) runs on Linux only: it relies on prctl \
     (PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER); the pgcoord library itself builds anywhere"
);

mod acquire;
mod bench;
mod capped_read;
mod cli;
mod db;
mod demo;
mod doctor;
mod duration;
mod error_line;
mod exit;
mod held;
mod help;
mod holders;
mod install;
mod job;
mod job_control;
mod key;
mod leader;
mod leader_args;
mod leader_show;
mod live;
mod logging;
mod messages;
mod min_interval;
mod multi;
mod names;
mod not_acquired;
mod os_limits;
mod permits;
mod printable;
mod proc_stat;
mod projection;
mod projection_args;
mod projection_dlq;
mod projection_reads;
mod projection_render;
mod projection_segments;
mod projection_watch;
mod read_only;
mod reader_gone;
mod redact;
mod run;
mod run_args;
mod semaphore_hint;
mod signals;
mod supervise;
mod tools;
mod usage_error;
mod watch_session;
mod watchdog;

/// The version `--version` prints: the package version and, when built
/// from a git checkout, the commit (see `build.rs`).
pub(crate) const VERSION: &str = env!("EVENTSOURCE_VERSION");

use std::io::Write;

use cli::{Cli, Command, LockCommand};

/// Prints one line on stderr, prefixed with the program name, with any
/// password masked.
macro_rules! report {
    ($($arg:tt)*) => {
        $crate::report_line(&format!($($arg)*))
    };
}
pub(crate) use report;

pub(crate) fn report_line(message: &str) {
    let line = format!("eventsource: {}\n", redact::scrub(message));
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Writes `text` to stdout; on failure (a full disk, a closed pipe) says
/// so on stderr and returns the exit code [`exit::IO_ERROR`].
pub(crate) fn print_stdout(text: &str) -> Result<(), i32> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) => {
            report!("cannot write to standard output: {e}");
            Err(exit::IO_ERROR)
        }
    }
}

/// Registers every password the command line or environment may carry
/// before anything is parsed, so that even clap's error messages are scrubbed.
fn register_secrets_early() {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        redact::register_url(&url);
    }
    if let Ok(pw) = std::env::var("PGPASSWORD") {
        redact::register([pw]);
    }
    // The command of `lock run` (after `--`) is not the tool's business.
    for arg in std::env::args_os().skip(1).take_while(|a| a != "--") {
        let arg = arg.to_string_lossy();
        if arg.contains("://") || arg.contains("password=") {
            let value = arg.strip_prefix("--database-url=").unwrap_or(&arg);
            redact::register_url(value);
        }
    }
}

fn main() {
    register_secrets_early();
    let cli = match cli::try_parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with code 0; errors to stderr with 2.
            // Errors may echo an argument (a URL): masked, and shortened when
            // long. Help and version are the tool's own text, printed as written.
            let e = usage_error::tidy(e, usage_error::url_typed(std::env::args_os()));
            let text = e.render().to_string();
            if e.use_stderr() {
                let _ = std::io::stderr().write_all(redact::scrub(&text).as_bytes());
            } else if let Err(code) = print_stdout(&text) {
                std::process::exit(code);
            }
            std::process::exit(e.exit_code());
        }
    };
    if let Some(url) = &cli.database_url {
        redact::register_url(url);
    }
    std::panic::set_hook(Box::new(|info| {
        report!("internal error: {info}");
    }));
    logging::init();

    // These need neither a runtime nor a database.
    match &cli.command {
        Command::Lock(LockCommand::Key(args)) => std::process::exit(key::print_keys(&args.keys)),
        Command::Watchdog(args) => std::process::exit(watchdog::run(
            std::time::Duration::from_millis(args.bound_ms),
        )),
        Command::Completions(args) => std::process::exit(tools::completions(args.shell)),
        Command::Man(args) => std::process::exit(tools::man_page(&args.command)),
        _ => {}
    }

    if let Err(line) = os_limits::check_open_files() {
        report!("{line}");
        std::process::exit(exit::SOFTWARE);
    }

    // One thread: the child's parent-death signal is tied to the thread that
    // spawned it, which must live as long as the process.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            report!("cannot start the async runtime: {e}");
            std::process::exit(exit::SOFTWARE);
        }
    };
    let mut code = runtime.block_on(dispatch(cli));
    if let Err(e) = std::io::stdout().flush() {
        report!("cannot write to standard output: {e}");
        if code == 0 {
            code = exit::IO_ERROR;
        }
    }
    // Exit without waiting for background tasks; the process's sessions end
    // with it, and the server releases whatever they still held. A `lock
    // run` that a shell's Ctrl-C ended dies of SIGINT here (see `signals`).
    signals::exit(code);
}

async fn dispatch(cli: Cli) -> i32 {
    let url = cli.database_url;
    match cli.command {
        Command::Lock(LockCommand::Key(args)) => key::print_keys(&args.keys),
        Command::Lock(LockCommand::Run(args)) => match db::require_url(url) {
            Ok(db) => run::run(args, db).await,
            Err(code) => code,
        },
        Command::Lock(LockCommand::Holders(args)) => match db::require_url(url) {
            Ok(db) => holders::holders(args, db).await,
            Err(code) => code,
        },
        Command::Lock(LockCommand::Top(args)) => match db::require_url(url) {
            Ok(db) => live::top::top(args, db).await,
            Err(code) => code,
        },
        Command::Lock(LockCommand::Doctor) => match db::require_url(url) {
            Ok(db) => doctor::doctor(db).await,
            Err(code) => code,
        },
        Command::Lock(LockCommand::Install) => match db::require_url(url) {
            Ok(db) => install::install(db).await,
            Err(code) => code,
        },
        Command::Lock(LockCommand::Bench(args)) => match db::require_url(url) {
            Ok(db) => bench::bench(args, db).await,
            Err(code) => code,
        },
        Command::Leader(command) => match db::require_url(url) {
            Ok(db) => leader::leader(command, db).await,
            Err(code) => code,
        },
        Command::Projection(command) => match db::require_url(url) {
            Ok(db) => projection::projection(command, db).await,
            Err(code) => code,
        },
        Command::Demo(args) => demo::demo(args, url).await,
        Command::DemoWorker(args) => demo::worker::worker(args).await,
        Command::Watchdog(_) | Command::Completions(_) | Command::Man(_) => exit::SOFTWARE,
    }
}
