//! Conversions from the driver's error types into the crate's, for code
//! that mixes its own tokio-postgres calls with the crate's (a writer's
//! transaction that also checks a fence, a transaction-scoped lock).

use tokio_postgres::error::SqlState as PgSqlState;

use super::connect::pg_error;
use crate::ports::backend_error::BackendErrorKind;
use crate::ports::sql_state::SqlState;

impl From<&PgSqlState> for SqlState {
    fn from(code: &PgSqlState) -> Self {
        SqlState::new(code.code())
    }
}

impl From<PgSqlState> for SqlState {
    fn from(code: PgSqlState) -> Self {
        SqlState::from(&code)
    }
}

/// A statement's failure: [`Error::Backend`](crate::Error::Backend) with the
/// server's SQLSTATE, message and the driver error as its source; a closed
/// connection is [`BackendErrorKind::Closed`], its message the driver's
/// text and no source.
impl From<tokio_postgres::Error> for crate::Error {
    fn from(e: tokio_postgres::Error) -> Self {
        crate::Error::Backend(pg_error(e, BackendErrorKind::Query))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_codes_convert_to_the_same_state() {
        assert_eq!(
            SqlState::from(&PgSqlState::UNDEFINED_TABLE),
            SqlState::UNDEFINED_TABLE
        );
        assert_eq!(
            SqlState::from(PgSqlState::QUERY_CANCELED),
            SqlState::QUERY_CANCELED
        );
    }
}
