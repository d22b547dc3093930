//! Why `lock run` did not get its lock, in one line, and the exit code
//! that goes with it: a conflict (75), a server that cancelled the wait
//! (77), a database that lacks the fence table (78), a standby or a server
//! that did not answer (69), `--timeout` spent on failed connections.

use std::time::Duration;

use pgcoord::PostgresLockManager;
use pgcoord::{
    error::{AcquireFailure, BackendErrorKind},
    Error,
};

use tokio_postgres::config::TargetSessionAttrs;

use crate::cli::RunArgs;
use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::messages::{conflict_message, no_fence_table};
use crate::{exit, report};

/// How long the best-effort "who holds it" query may take after a conflict
/// (the server has just answered, so it is alive).
const HOLDERS_TIMEOUT: Duration = Duration::from_secs(1);

/// However short `--timeout` is, the first attempt is given the lock
/// manager's liveness timeout to answer (the engine's own rule): connecting
/// alone can take longer than a few milliseconds, and a server that answers
/// at all gets to say "granted" or "held". Only one silent for this long
/// is a server that did not answer (exit 69).
pub const ANSWER_FLOOR: Duration = Duration::from_millis(crate::run_args::DEFAULT_WATCHDOG_MS);
/// Whether `e` is the lock manager's refusal of a hot standby.
pub fn is_standby(e: &Error) -> bool {
    e.as_backend()
        .is_some_and(|b| b.kind() == BackendErrorKind::Standby)
}

/// A hot standby's refusal in the tool's words (the library's own message
/// names its builder option, not the tool's flag).
pub fn standby_refused(args: &RunArgs, db: &Database) -> String {
    let or_allow = match args.built_for {
        Some(_) => "",
        None => ", or pass --allow-standby for a standby-only job",
    };
    format!(
        "the server is a hot standby (in recovery), whose advisory locks do not exclude \
         holders on the primary (database {}); {}{or_allow}",
        db.shown(),
        to_the_primary(db)
    )
}

/// How to reach the primary instead: with several hosts (a standby listed
/// first, the driver taking the first that answers), ask for the one that
/// takes writes; with one, name another.
pub fn to_the_primary(db: &Database) -> &'static str {
    let c = db.options.config();
    let hosts = c.get_hosts().len().max(c.get_hostaddrs().len());
    let picks_the_primary = c.get_target_session_attrs() == TargetSessionAttrs::ReadWrite;
    match (hosts > 1 && !picks_the_primary, db.url.is_some()) {
        (true, true) => {
            "the URL lists several hosts: add target_session_attrs=read-write to it, so that \
             the one that takes writes (the primary) is used"
        }
        (true, false) => {
            "the settings list several hosts: set PGTARGETSESSIONATTRS=read-write, so that \
             the one that takes writes (the primary) is used"
        }
        (false, _) => "point the URL at the primary",
    }
}

/// Reports that `--timeout` ran out while the connection kept failing.
pub fn gave_up(args: &RunArgs, what: &str, db: &Database, last: Option<&Error>) -> i32 {
    let standby = last.is_some_and(is_standby);
    let why = match last {
        Some(_) if standby => standby_refused(args, db),
        Some(e) => db::describe_failure("", Some(db), e),
        None => "the database could not be reached".to_owned(),
    };
    let during = match standby {
        true => "only a hot standby answered (its advisory locks exclude nobody on the primary)",
        false => "connecting kept failing",
    };
    report!(
        "{what} not acquired: --timeout {} ran out while {during}; the last failure: {why}; \
         the command was not run",
        format_duration(args.timeout.unwrap_or_default())
    );
    exit::UNAVAILABLE
}

/// Reports a failed acquisition; returns the exit code.
pub async fn not_acquired(
    args: &RunArgs,
    keys: &[&str],
    db: &Database,
    manager: &PostgresLockManager,
    timeout: Option<Duration>,
    e: &Error,
) -> i32 {
    let reason = e.as_lock_acquisition().map(|a| &a.reason);
    let what = crate::multi::describe(keys);
    if let Some(n) = args.permits {
        if let Some(line) = crate::permits::not_acquired(&args.key, n, timeout, e) {
            report!("{line}");
            return match reason {
                Some(AcquireFailure::PermitCountMismatch { .. }) => exit::CONFIG,
                _ => args.conflict_exit_code,
            };
        }
    }
    if let Some(conflict) = e.as_lock_acquisition().filter(|a| a.is_conflict()) {
        // In a set, the key that was not granted.
        let key = conflict.key.as_str();
        // The server answered a moment ago; still, bound the extra query.
        let holders = tokio::time::timeout(HOLDERS_TIMEOUT, manager.holders(&[key]))
            .await
            .ok()
            .and_then(Result::ok);
        let mut line = conflict_message(key, timeout, holders.as_deref());
        if crate::multi::is_set(args) {
            line.push_str(&format!("; {what} are taken all or none: none is held"));
        }
        if args.shared {
            line.push_str(
                " (shared mode: an exclusive holder, or an exclusive run queued first, keeps \
                 shared runs out)",
            );
        }
        report!("{line}");
        return args.conflict_exit_code;
    }
    if let Some(AcquireFailure::Cancelled { reason }) = reason {
        report!(
            "the wait for {what} was cancelled by the server ({reason}): nobody said the \
             key is held elsewhere; the command was not run; exiting with {}",
            exit::CANCELLED
        );
        return exit::CANCELLED;
    }
    let kind = e.as_backend().map(|b| b.kind());
    if kind == Some(BackendErrorKind::FencingNotInstalled) {
        if let Some(subcommand) = args.built_for {
            report!(
                "{subcommand} needs the fence table (its terms live there), {}; the command was \
                 not run",
                no_fence_table(&db.shown())
            );
            return exit::CONFIG;
        }
        report!(
            "{what} not acquired: --fence needs the fencing table, {}; the command was not run",
            no_fence_table(&db.shown())
        );
        return exit::CONFIG;
    }
    if kind == Some(BackendErrorKind::Standby) {
        report!(
            "{what} not acquired: {}; the command was not run",
            standby_refused(args, db)
        );
        return exit::UNAVAILABLE;
    }
    if e.as_backend()
        .is_some_and(|b| b.kind() == BackendErrorKind::NoAnswer)
    {
        // However short --timeout is, the server was given ANSWER_FLOOR.
        let within = args
            .timeout
            .map(|t| format!(" within {}", format_duration(t.max(ANSWER_FLOOR))))
            .unwrap_or_default();
        report!(
            "{what} not acquired: the server did not answer{within} (database {}); \
             the command was not run",
            db.shown()
        );
        return exit::UNAVAILABLE;
    }
    // The error names the key already, or (a set's failure to connect) not.
    crate::read_only::fail(&crate::multi::failed(&what, e), db, e).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Database {
        Database::parse(url).expect("valid settings")
    }

    #[test]
    fn a_standby_listed_first_among_several_hosts_gets_target_session_attrs() {
        let several = parsed("postgres://app@standby.internal,primary.internal/app");
        let hint = to_the_primary(&several);
        assert!(hint.contains("target_session_attrs=read-write"), "{hint}");
        assert!(!hint.contains("point the URL at the primary"), "{hint}");
        // One host: another URL is the only way.
        let one = parsed("postgres://app@standby.internal/app");
        assert_eq!(to_the_primary(&one), "point the URL at the primary");
        // Several hosts already asking for the primary: name it.
        let asking = parsed(
            "postgres://app@standby.internal,primary.internal/app?target_session_attrs=read-write",
        );
        assert_eq!(to_the_primary(&asking), "point the URL at the primary");
    }
}
