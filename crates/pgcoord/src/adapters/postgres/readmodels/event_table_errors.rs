//! The errors of [`PostgresEventTable`](super::PostgresEventTable)'s
//! statements, worded for the one who runs the feed.

use super::source::query_error;
use crate::ports::error::Error;
use crate::ports::readmodels::ReadModelError;

pub(super) fn serialization<E>(e: serde_json::Error) -> Error {
    ReadModelError::Serialization {
        model: std::any::type_name::<E>(),
        reason: e.to_string(),
        source: Some(Box::new(e)),
    }
    .into()
}

/// A failed read of the table's sequence. A role without SELECT on it is
/// told which grant the feed needs (the table's own grants do not cover
/// the sequence).
pub(super) fn sequence_error(table: &str, e: tokio_postgres::Error) -> Error {
    if e.code() != Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) {
        return query_error(e);
    }
    let said = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |db| db.message().to_owned());
    let message = format!(
        "{said}: the feed reads it to know which positions are taken; \
         GRANT SELECT ON SEQUENCE \"{table}_position_seq\" to the runner's role"
    );
    let error = crate::ports::error::BackendError::new(
        crate::ports::error::BackendErrorKind::Query,
        message,
    );
    // The message says the server's: its error is no cause of ours.
    Error::Backend(error.with_code("42501").with_driver_error(e))
}

pub(super) fn parse_xid(text: &str) -> crate::ports::error::Result<u64> {
    text.parse().map_err(|_| {
        Error::Backend(crate::ports::error::BackendError::new(
            crate::ports::error::BackendErrorKind::Other,
            format!("unexpected transaction id {text:?}"),
        ))
    })
}
