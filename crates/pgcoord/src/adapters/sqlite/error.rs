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
        .with_driver_error(e),
    )
}

/// The switch of the file database at `path` to WAL failed. Refused as
/// read-only (`SQLITE_READONLY`, "attempt to write a readonly database") or
/// unable to open a file (`SQLITE_CANTOPEN`): the file, or the directory
/// where SQLite creates its `-wal` and `-shm` files, is not writable by
/// this process; the error says so and names them.
pub(super) fn wal_error(path: &Path, e: rusqlite::Error) -> Error {
    if !matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
    ) {
        return sqlite_error(e);
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let file = path.display();
    Error::Backend(
        BackendError::new(
            BackendErrorKind::Connect,
            format!(
                "cannot open SQLite database {file} in WAL mode: {e}; the file and its \
                 directory {} must be writable by this process (SQLite creates \
                 {file}-wal and {file}-shm beside the file)",
                dir.display()
            ),
        )
        .with_driver_error(e),
    )
}

/// Converts a rusqlite error, whose text is the message (the rusqlite
/// error is the [`driver_error`](BackendError::driver_error), no source:
/// a chain walk would say it twice); busy/locked errors carry the codes
/// `SQLITE_BUSY` / `SQLITE_LOCKED` (transient for the projection). A
/// missing column is named and `migrate_schema` suggested.
pub(crate) fn sqlite_error(e: rusqlite::Error) -> Error {
    let code = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) => Some("SQLITE_BUSY"),
        Some(ErrorCode::DatabaseLocked) => Some("SQLITE_LOCKED"),
        Some(ErrorCode::ConstraintViolation) => Some("SQLITE_CONSTRAINT"),
        _ => None,
    };
    let text = e.to_string();
    let text = match text.strip_prefix("no such column: ") {
        // With double-quoted literals off, a model field whose column the
        // table lacks ends here (as PostgreSQL's 42703).
        Some(rest) => format!(
            "column {} does not exist; if a field was added to the model, run \
             migrate_schema to add its column",
            missing_column(rest)
        ),
        None => text,
    };
    let mut be = BackendError::new(BackendErrorKind::Query, text);
    if let Some(code) = code {
        be = be.with_code(crate::ports::sql_state::SqlState::new(code));
    }
    Error::Backend(be.with_driver_error(e))
}

/// The column named at the start of SQLite's "no such column: …" text,
/// quoted: `"tier" - should this be …` or `t.tier in …`.
fn missing_column(rest: &str) -> String {
    let name = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or(quoted),
        None => rest.split_whitespace().next().unwrap_or(rest),
    };
    format!("{name:?}")
}

/// For `?` on rusqlite's calls inside
/// [`SqliteDatabase::call`](super::SqliteDatabase::call): the error as the
/// crate's own statements report theirs.
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        sqlite_error(e)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::wal_error;

    fn failure(code: std::ffi::c_int, message: &str) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(message.into()))
    }

    #[test]
    fn a_read_only_wal_switch_names_the_file_and_its_directory() {
        let e = wal_error(
            Path::new("/srv/data/app.db"),
            failure(
                rusqlite::ffi::SQLITE_READONLY,
                "attempt to write a readonly database",
            ),
        );
        let text = e.to_string();
        for part in [
            "/srv/data/app.db",
            "attempt to write a readonly database",
            "directory /srv/data must be writable",
            "/srv/data/app.db-wal",
            "/srv/data/app.db-shm",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        let plain = wal_error(
            Path::new("app.db"),
            failure(rusqlite::ffi::SQLITE_CANTOPEN, "x"),
        );
        assert!(plain.to_string().contains("directory . must"), "{plain}");
    }

    #[test]
    fn other_failures_are_left_as_they_are() {
        let e = wal_error(
            Path::new("/srv/data/app.db"),
            failure(
                rusqlite::ffi::SQLITE_CORRUPT,
                "database disk image is malformed",
            ),
        );
        assert!(!e.to_string().contains("/srv/data"), "{e}");
    }
}
