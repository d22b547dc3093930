//! [`SqlState`]: the five-character code a database attaches to an error.

use std::borrow::Cow;
use std::fmt;

/// A SQLSTATE code (`"42P01"`, ...), as the server reported it.
///
/// Compare with the constants, never with message text:
///
/// ```
/// use pgcoord::error::{BackendError, BackendErrorKind, SqlState};
///
/// let e = BackendError::new(BackendErrorKind::Query, "relation does not exist")
///     .with_code(SqlState::UNDEFINED_TABLE);
/// assert_eq!(e.code(), Some(&SqlState::UNDEFINED_TABLE));
/// assert_eq!(e.code().map(SqlState::code), Some("42P01"));
/// assert_eq!(SqlState::new("42P01"), SqlState::UNDEFINED_TABLE);
/// ```
///
/// With the `postgres` feature, a `tokio_postgres::error::SqlState`
/// converts into it with `From`. The crate has its own type so that a
/// build without a database driver names codes the same way. SQLite has
/// no SQLSTATEs: its errors carry the result code's name here
/// (`"SQLITE_BUSY"`, `"SQLITE_CONSTRAINT"`, ...).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SqlState(Cow<'static, str>);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal;)*) => {
        impl SqlState {
            $($(#[$doc])* pub const $name: SqlState = SqlState(Cow::Borrowed($code));)*
        }
    };
}

codes! {
    /// `23505`: a unique constraint was violated.
    UNIQUE_VIOLATION = "23505";
    /// `25006`: a write in a read-only transaction (a standby, or
    /// `default_transaction_read_only`).
    READ_ONLY_SQL_TRANSACTION = "25006";
    /// `25P02`: the transaction was already aborted by an earlier error.
    IN_FAILED_SQL_TRANSACTION = "25P02";
    /// `26000`: a prepared statement does not exist (a pooler in
    /// transaction mode switched the session).
    INVALID_SQL_STATEMENT_NAME = "26000";
    /// `42P05`: a prepared statement of that name exists already (a pooler
    /// in transaction mode gave the session another client's server
    /// session).
    DUPLICATE_PREPARED_STATEMENT = "42P05";
    /// `28000`: the server refused the role (`pg_hba.conf`).
    INVALID_AUTHORIZATION_SPECIFICATION = "28000";
    /// `28P01`: wrong password.
    INVALID_PASSWORD = "28P01";
    /// `3D000`: the database does not exist.
    INVALID_CATALOG_NAME = "3D000";
    /// `3F000`: no such schema (or, for a `CREATE`, none in the
    /// search_path to create in).
    INVALID_SCHEMA_NAME = "3F000";
    /// `40001`: a serialization failure; retry the transaction.
    SERIALIZATION_FAILURE = "40001";
    /// `40P01`: a deadlock was detected; retry the transaction.
    DEADLOCK_DETECTED = "40P01";
    /// `42501`: the role lacks a privilege.
    INSUFFICIENT_PRIVILEGE = "42501";
    /// `42883`: a function does not exist.
    UNDEFINED_FUNCTION = "42883";
    /// `42P01`: a table does not exist.
    UNDEFINED_TABLE = "42P01";
    /// `42P07`: a table of that name exists already.
    DUPLICATE_TABLE = "42P07";
    /// `53300`: the server has no connection slot left.
    TOO_MANY_CONNECTIONS = "53300";
    /// `55P03`: a lock was not available (`lock_timeout`, `NOWAIT`).
    LOCK_NOT_AVAILABLE = "55P03";
    /// `57014`: the statement was cancelled (`pg_cancel_backend`,
    /// `statement_timeout`).
    QUERY_CANCELED = "57014";
    /// `57P01`: the server ended the session (`pg_terminate_backend`,
    /// shutdown).
    ADMIN_SHUTDOWN = "57P01";
    /// `57P03`: the server is starting up or shutting down.
    CANNOT_CONNECT_NOW = "57P03";
    /// `ESF01`: this crate's own code for a write refused by a fence (a
    /// stale fencing token); see `pgcoord::postgres::fencing`.
    FENCED = "ESF01";
}

impl SqlState {
    /// The state for `code` (any five characters the server sent).
    pub fn new(code: impl Into<String>) -> Self {
        SqlState(Cow::Owned(code.into()))
    }

    /// The code itself, e.g. `"42P01"`.
    pub fn code(&self) -> &str {
        &self.0
    }

    /// The class: the code's first two characters (`"42"` for syntax and
    /// access errors, `"08"` for connection exceptions, ...).
    pub fn class(&self) -> &str {
        self.0.get(..2).unwrap_or(&self.0)
    }
}

impl From<&str> for SqlState {
    fn from(code: &str) -> Self {
        SqlState::new(code)
    }
}

impl fmt::Display for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SqlState({:?})", &*self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_and_parsed_codes_are_equal() {
        assert_eq!(SqlState::new("57014"), SqlState::QUERY_CANCELED);
        assert_eq!(SqlState::FENCED.code(), "ESF01");
        assert_eq!(SqlState::UNDEFINED_TABLE.class(), "42");
        assert_eq!(SqlState::new("4").class(), "4");
        assert_eq!(
            format!("{:?}", SqlState::UNDEFINED_TABLE),
            "SqlState(\"42P01\")"
        );
    }
}
