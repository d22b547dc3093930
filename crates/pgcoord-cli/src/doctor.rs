//! `eventsource lock doctor`: checks once that the database really gives
//! session-level advisory locks (see `PostgresLockManager::verify`).

use pgcoord::error::BackendErrorKind;
use pgcoord::postgres::VerifyProblem;

use crate::db::{self, Database};
use crate::printable::printable;
use crate::report;

/// The exit code when the server answers but fails a check.
pub const CHECK_FAILED: i32 = 1;

/// Runs `lock doctor`; returns the exit code.
pub async fn doctor(db: Database) -> i32 {
    // `lock run` takes one lock per process: no budget advice applies.
    let manager = db
        .manager_builder()
        .holder_id("doctor")
        .max_held_locks(1)
        .build();
    let manager = match manager {
        Ok(m) => m,
        Err(e) => return db::fail("cannot check the database", Some(&db), &e),
    };
    match manager.verify().await {
        Ok(report) => {
            // Line by line, escaped: the report names what the server
            // has (its version string, settings, a look-alike function's
            // schema), which anyone who may create a schema can name.
            let mut text: String = report
                .to_string()
                .lines()
                .map(|l| format!("{}\n", printable(l)))
                .collect();
            if let Some(w) = lease_advice(&report.settings) {
                text.push_str(&format!("warning: {w}\n"));
            }
            let _ = manager.close().await;
            if let Some(w) = read_only_advice(&db).await {
                text.push_str(&format!("warning: {w}\n"));
            }
            match crate::print_stdout(&text) {
                Ok(()) => 0,
                Err(code) => code,
            }
        }
        Err(e) => match problem_of(&e) {
            Some(problem) => {
                // Several hosts, the driver taking the first that answers:
                // the fix is in the URL, as `lock run` says.
                let hint = match (problem, crate::not_acquired::to_the_primary(&db)) {
                    (VerifyProblem::Standby, several) if several.contains("several hosts") => {
                        format!("; {several}")
                    }
                    _ => String::new(),
                };
                report!(
                    "FAILED: {}{hint} (database {})",
                    printable(&problem.to_string()),
                    db.shown()
                );
                CHECK_FAILED
            }
            None if lock_table_full(&e) => {
                // The server answered: its lock table is what the check
                // is about, and it is full.
                report!(
                    "FAILED: the server's shared lock table is full ({}): no session may take \
                     another lock, advisory or a query's table lock, until some are released; \
                     see who holds them with `eventsource lock holders` once there is room, and \
                     raise max_locks_per_transaction (a server restart) if the fleet needs more \
                     (database {})",
                    db::error_chain(&e),
                    db.shown()
                );
                CHECK_FAILED
            }
            None if cancelled(&e) => {
                report!(
                    "INCONCLUSIVE: the server cancelled a check's statement ({}) although the \
                     doctor turns statement_timeout off for its own sessions: something else \
                     cancels statements (pg_cancel_backend, a pooler's query timeout?); run it \
                     again (database {})",
                    db::error_chain(&e),
                    db.shown()
                );
                CHECK_FAILED
            }
            None => db::fail("cannot check the database", Some(&db), &e),
        },
    }
}

/// Advice when this role's sessions are read-only on a primary: the locks
/// work, the writes of the fenced features do not. Best effort, on a
/// session of its own (nothing when it cannot be asked; a standby was
/// reported by the checks already).
async fn read_only_advice(db: &Database) -> Option<String> {
    let client = db.connect().await.ok()?;
    match crate::read_only::read_only(&client).await.ok()?? {
        crate::read_only::ReadOnly::Standby => None,
        by_default => Some(format!(
            "for --fence, --min-interval, leader run and lock install: {}",
            by_default.hint()
        )),
    }
}

/// The lock manager's liveness interval: how long before a stop the tool's
/// session may have last spoken.
const LIVENESS_INTERVAL_MS: u64 = 500;

/// Advice for `lock run` from `idle_session_timeout` (as reported, e.g.
/// `3000ms`): a lease that ends a stopped tool's session before its
/// watchdog has killed the job leaves an overlap.
fn lease_advice(settings: &[(String, String)]) -> Option<String> {
    let (_, value) = settings
        .iter()
        .find(|(name, _)| name == "idle_session_timeout")?;
    let ms: u64 = value.strip_suffix("ms")?.parse().ok()?;
    let watchdog = crate::cli::DEFAULT_WATCHDOG_MS;
    if ms == 0 || ms > watchdog + LIVENESS_INTERVAL_MS {
        return None;
    }
    Some(format!(
        "for lock run: idle_session_timeout ({ms} ms) is not above the default --watchdog \
         ({watchdog} ms) plus the liveness interval ({LIVENESS_INTERVAL_MS} ms): a stopped \
         tool's session can end before its watchdog has killed the job, and the next holder \
         overlap it; raise the timeout or pass a shorter --watchdog"
    ))
}

/// Whether the server cancelled a statement (SQLSTATE 57014).
fn cancelled(e: &pgcoord::Error) -> bool {
    e.as_backend().and_then(|b| b.code()) == Some(&pgcoord::error::SqlState::QUERY_CANCELED)
}

/// Whether the server's shared lock table is full ("out of shared
/// memory", SQLSTATE 53200).
fn lock_table_full(e: &pgcoord::Error) -> bool {
    e.as_backend()
        .and_then(|b| b.code())
        .is_some_and(|c| c.code() == "53200")
}

/// The failed check, when the error is one.
fn problem_of(e: &pgcoord::Error) -> Option<&VerifyProblem> {
    let backend = e.as_backend()?;
    if backend.kind() != BackendErrorKind::NotPostgres {
        return None;
    }
    std::error::Error::source(backend)?.downcast_ref::<VerifyProblem>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pgcoord::{error::BackendError, Error};

    #[test]
    fn a_lease_shorter_than_the_watchdog_draws_advice() {
        let s = |v: &str| vec![("idle_session_timeout".to_owned(), v.to_owned())];
        assert!(lease_advice(&s("2000ms")).is_some_and(|w| w.contains("--watchdog")));
        assert!(lease_advice(&s("2500ms")).is_some());
        assert_eq!(lease_advice(&s("3000ms")), None);
        assert_eq!(lease_advice(&s("0ms")), None);
        assert_eq!(lease_advice(&[]), None);
    }

    #[test]
    fn a_failed_check_is_told_apart_from_an_unreachable_server() {
        let failed: Error = BackendError::new(BackendErrorKind::NotPostgres, "x")
            .with_source(VerifyProblem::LockNotRecorded)
            .into();
        assert_eq!(problem_of(&failed), Some(&VerifyProblem::LockNotRecorded));
        let down: Error = BackendError::new(BackendErrorKind::Connect, "refused").into();
        assert_eq!(problem_of(&down), None);
        let other: Error = BackendError::new(BackendErrorKind::NotPostgres, "garbage").into();
        assert_eq!(problem_of(&other), None);
    }
}
