//! `eventsource lock run`: acquire (KEY, a permit, or with `--also` a set
//! of keys), run the command as a job, supervise it, release.
//!
//! Supervision rules (the lock logic itself is the library's):
//! - signals caught while waiting for the lock end the wait (exit 128+N);
//! - signals caught while the job runs are forwarded to its process group,
//!   and the lock is released only after every process of the group ended;
//! - a lost lock stops the group (SIGTERM, SIGKILL after the grace period);
//! - the tool dying or stopping is covered by COMMAND's parent-death
//!   signal and by the watchdog process (see `watchdog`).

use pgcoord::error::BackendErrorKind;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::acquire::{acquire, close_within, Acquired};
use crate::cli::RunArgs;
use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::held::Held;
use crate::job;
use crate::messages::{describe_status, exit_code};
use crate::min_interval::Claimed;
use crate::signals::Signals;
use crate::supervise::{supervise, Grace};
use crate::watchdog::Watchdog;
use crate::{exit, report};

/// How long the release after the job's end may take before the tool
/// exits anyway (its session then ends, which frees the lock too).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long closing the manager at exit, and then its sessions' ending, may
/// each take (they only finish steps already sent).
const EXIT_CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// Runs `lock run`; returns the exit code.
///
/// A run started as a foreground job of its terminal that ends because of
/// SIGINT or SIGQUIT (COMMAND died of it, or the tool received it while it
/// waited for the lock) dies of that signal once cleaned up (see
/// `signals::exit`), so that the shell ends a loop around it; when the
/// signal came from the terminal to COMMAND holding it, the tool sends it
/// to its own process group too, so that a script or pipeline around the
/// tool gets it, as it would have without the hand-over.
pub async fn run(args: RunArgs, db: Database) -> i32 {
    let foreground = job::in_terminal_foreground();
    if let Err(why) = crate::multi::check_env_fits(&args) {
        report!("{why}");
        return exit::USAGE;
    }
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    // Before any child exists: orphans of the job come back to this process.
    job::become_subreaper();
    let (manager, held) = match acquire(&args, &db, &mut signals).await {
        Acquired::Held(manager, held) => (manager, held),
        Acquired::Exit(code) => {
            crate::signals::die_of_at_exit(foreground, signals.received(), code, false);
            return code;
        }
    };
    let mut died_of = None;
    let code = run_holding(&args, &db, held, &mut signals, &mut died_of).await;
    // A signal COMMAND died of while it held the terminal, that was not
    // sent to the tool (nor forwarded by it), came from the terminal.
    let from_terminal =
        died_of.is_some_and(|(sig, held_terminal)| held_terminal && !signals.has_received(sig));
    let died_of = died_of.map(|(sig, _)| sig);
    // Whatever the manager still has going (a wait it left, such as a
    // semaphore's look at a slot granted after the permit came another
    // way, whose grant is given back at once) finishes before the exit, so
    // that nothing of this process is left in the server once it has ended.
    close_within(&manager, EXIT_CLOSE_TIMEOUT, EXIT_CLOSE_TIMEOUT).await;
    crate::signals::die_of_at_exit(foreground, died_of, code, from_terminal);
    code
}

/// Runs the command holding `held`, releases it; returns the exit code.
/// `died_of`: the signal COMMAND died of, if it did, and whether it held
/// the terminal then.
async fn run_holding(
    args: &RunArgs,
    db: &Database,
    held: Held,
    signals: &mut Signals,
    died_of: &mut Option<(nix::sys::signal::Signal, bool)>,
) -> i32 {
    let what = crate::multi::describe(&crate::multi::keys(args));
    let guard = held.key_guard(&args.key);
    tracing::info!(key = %args.key, lock_id = guard.lock_id(), locks = %what, "acquired");
    if held.is_lost() {
        report!(
            "{} was lost right after it was acquired; the command was not run",
            held.lost_name(&what)
        );
        return args.lost_exit_code;
    }

    // Under the lock, before COMMAND starts: a crash from here on counts.
    let started = match args.min_interval {
        Some(interval) => match crate::min_interval::claim(args, interval, db, &what).await {
            Claimed::Run(claim) => Some(claim),
            Claimed::Exit(code) => {
                release(held, &what).await;
                return code;
            }
        },
        None => None,
    };
    if started.is_some() && held.is_lost() {
        report!(
            "{} was lost while this run's start was recorded; the command was not run, but the \
             start counts for --min-interval; exiting with {}",
            held.lost_name(&what),
            args.lost_exit_code
        );
        return args.lost_exit_code;
    }

    // In lease mode the server may free the lock a lease after the tool
    // froze: the watchdog must have killed the job well before that.
    let bound = match args.lease {
        Some(lease) => args.watchdog.min(lease / 2),
        None => args.watchdog,
    };
    let mut watchdog = match Watchdog::spawn(bound) {
        Ok(w) => w,
        Err(e) => {
            report!("cannot start the watchdog process: {e}; the command was not run");
            release(held, &what).await;
            return exit::SOFTWARE;
        }
    };
    let mut env: Vec<(&str, String)> = args.extra_env.clone();
    if args.shared {
        env.push(("EVENTSOURCE_LOCK_MODE", "shared".to_owned()));
    }
    if args.permits.is_some() {
        let slot = crate::permits::slot_of(&args.key, guard.key());
        env.push((
            crate::permits::PERMIT_ENV,
            slot.unwrap_or_default().to_string(),
        ));
    }
    if let Some(f) = guard.fence() {
        for name in std::iter::once("EVENTSOURCE_LOCK_FENCE").chain(args.fence_env.iter().copied())
        {
            env.push((name, f.to_string()));
        }
    }
    if let Some(claim) = &started {
        env.push((
            crate::min_interval::STARTED_ENV,
            crate::min_interval::timestamp(claim.at),
        ));
    }
    if let Held::Set(set) = &held {
        env.extend(crate::multi::env(set));
    }
    let lock_id = guard.lock_id();
    let mut job_control = crate::supervise::prepare(signals, args.lease);
    let spawned = job::spawn(&args.command, &args.key, lock_id, &env, watchdog.fd());
    let mut job = match spawned {
        Ok(job) => job,
        Err(e) => {
            let program = args.command[0].to_string_lossy().into_owned();
            let code = if e.kind() == io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
            // Nothing ran: the start does not use up --min-interval.
            let counts = match &started {
                Some(claim) => {
                    format!("; {}", crate::min_interval::take_back(claim, db).await)
                }
                None => String::new(),
            };
            report!("cannot run {program:?}: {e}{counts}");
            watchdog.finish().await;
            release(held, &what).await;
            return code;
        }
    };
    let pgid = job.pgid;

    let supervised = supervise(
        &mut job,
        &held,
        &what,
        signals,
        &mut job_control,
        Grace {
            kill: args.kill_grace,
            leased: args.lease.is_some(),
        },
        &mut watchdog,
    )
    .await;
    let bound = watchdog.bound();
    let ended = match supervised {
        Ok(ended) => ended,
        Err(e) => {
            report!("cannot wait for the command (pgid {pgid}): {e}");
            job.signal(nix::sys::signal::Signal::SIGKILL);
            return exit::SOFTWARE;
        }
    };
    let watchdog_killed = watchdog.finish().await;
    let status = ended.status;
    *died_of = status
        .signal()
        .and_then(|n| nix::sys::signal::Signal::try_from(n).ok())
        .map(|sig| (sig, ended.held_terminal));

    if watchdog_killed {
        report!(
            "this process was stopped for longer than --watchdog {} while the command ran, so \
             the watchdog sent SIGKILL to the command's process group: while this process \
             could not look, its lock may have been lost (the server may end a silent session) \
             before the command finished, so the command's work may have overlapped another \
             holder's; the command {}{}; exiting with {} (the lock-lost code)",
            format_duration(bound),
            describe_status(status),
            if status.code().is_some() {
                " (by itself, before or at the kill)"
            } else {
                ""
            },
            args.lost_exit_code
        );
        return args.lost_exit_code;
    }
    if ended.lost || held.is_lost() {
        let gone = held.lost_name(&what);
        drop(held);
        let when = if ended.lost_while_stopped {
            "while the command was stopped, so another holder may have taken it while the \
             command's work was left half done"
        } else {
            "while the command ran, so its work may have overlapped the next holder's"
        };
        report!(
            "{gone} was lost {when}; the command {}; exiting with {} (the lock-lost code)",
            describe_status(status),
            args.lost_exit_code
        );
        return args.lost_exit_code;
    }
    let code = exit_code(status);
    let one_of = if crate::multi::is_set(args) {
        format!("one of {what}")
    } else {
        what.clone()
    };
    match tokio::time::timeout(RELEASE_TIMEOUT, held.release()).await {
        Ok(Ok(())) => code,
        Ok(Err(e)) if e.is_lock_lost() => {
            report!(
                "the command {}, but {one_of} was lost before it was released: \
                 exclusion is not guaranteed for its last moments; exiting with {}",
                describe_status(status),
                args.lost_exit_code
            );
            args.lost_exit_code
        }
        Ok(Err(e))
            if e.as_backend()
                .is_some_and(|b| b.kind() == BackendErrorKind::NotPostgres) =>
        {
            // The unlock reached a server connection other than the one the
            // lock was granted on (a pooler in transaction mode): nothing
            // of this process frees it. Nor can it tell whether the lock
            // was still there: such a pooler closes a server connection
            // (and the lock on it) when any client leaves it mid-statement,
            // telling nobody. So the run cannot claim exclusion.
            report!(
                "releasing {what} failed ({}): the lock could not be confirmed held until the \
                 command finished (a pooler in transaction mode may have closed the server \
                 connection it lived on, and another holder may have run meanwhile), and if \
                 it is still there it may stay held on that server connection until the pooler \
                 closes it (`eventsource lock holders` shows it; pg_terminate_backend of that \
                 pid frees it); the command {}; exiting with {} (the lock-lost code)",
                db::error_chain(&e),
                describe_status(status),
                args.lost_exit_code
            );
            args.lost_exit_code
        }
        Ok(Err(e)) => {
            report!(
                "warning: releasing {what} failed ({}); it is freed when this process exits",
                db::error_chain(&e)
            );
            code
        }
        Err(_) => {
            report!(
                "warning: releasing {what} took longer than {}; it is freed when this process exits",
                format_duration(RELEASE_TIMEOUT)
            );
            code
        }
    }
}

/// Releases locks whose command never ran, reporting failures only.
async fn release(held: Held, what: &str) {
    match tokio::time::timeout(RELEASE_TIMEOUT, held.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report!("warning: releasing {what} failed: {}", db::error_chain(&e)),
        Err(_) => report!("warning: releasing {what} timed out"),
    }
}
