//! `eventsource lock doctor`: checks once that the database really gives
//! session-level advisory locks (see `PostgresLockManager::verify`).

use eventsource::adapters::postgres::VerifyProblem;
use eventsource::BackendErrorKind;

use crate::db::{self, Database};
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
    match manager.verify().await {
        Ok(report) => match crate::print_stdout(&report.to_string()) {
            Ok(()) => 0,
            Err(code) => code,
        },
        Err(e) => match problem_of(&e) {
            Some(problem) => {
                report!("FAILED: {problem} (database {})", db.shown());
                CHECK_FAILED
            }
            None => db::fail("cannot check the database", Some(&db), &e),
        },
    }
}

/// The failed check, when the error is one.
fn problem_of(e: &eventsource::Error) -> Option<&VerifyProblem> {
    let backend = e.as_backend()?;
    if backend.kind() != BackendErrorKind::NotPostgres {
        return None;
    }
    std::error::Error::source(backend)?.downcast_ref::<VerifyProblem>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use eventsource::{BackendError, Error};

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
