//! rusqlite errors in the crate's terms: a failed open ([`connect_error`])
//! and a failed statement ([`sqlite_error`]).

use std::path::Path;

use rusqlite::ErrorCode;

use crate::ports::error::{BackendError, BackendErrorKind, Error};

pub(super) fn connect_error(path: &Path, e: rusqlite::Error) -> Error {
    Error::Backend(
        BackendError::new(
            BackendErrorKind::Connect,
            format!("cannot open SQLite database {}: {e}", path.display()),
        )
        .with_source(e),
    )
}

/// Converts a rusqlite error; busy/locked errors carry the codes
/// `SQLITE_BUSY` / `SQLITE_LOCKED` (transient for the projection).
pub(crate) fn sqlite_error(e: rusqlite::Error) -> Error {
    let code = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) => Some("SQLITE_BUSY"),
        Some(ErrorCode::DatabaseLocked) => Some("SQLITE_LOCKED"),
        Some(ErrorCode::ConstraintViolation) => Some("SQLITE_CONSTRAINT"),
        _ => None,
    };
    let mut be = BackendError::new(BackendErrorKind::Query, e.to_string());
    if let Some(code) = code {
        be = be.with_code(crate::ports::sql_state::SqlState::new(code));
    }
    Error::Backend(be.with_source(e))
}
