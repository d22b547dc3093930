//! The `tracing` spans of the read-model repositories, named after
//! OpenTelemetry's database conventions (see `docs/observability.md`).
//!
//! Every repository call of the PostgreSQL, SQLite and in-memory adapters
//! runs in a span `eventsource.readmodel.<operation>` carrying
//! `db.system` / `db.system.name`, `db.operation.name`,
//! `db.collection.name`, `db.namespace`, `server.address` and
//! `server.port` where the adapter knows them, and on failure `error.type`,
//! `db.response.status_code` and `otel.status_code = "ERROR"`. `otel.name`
//! (`"<operation> <table>"`) and `otel.kind = "client"` are read by
//! `tracing-opentelemetry`. Field values are only computed when a
//! subscriber wants the span.

use std::future::Future;

use tracing::{Instrument, Span};

use crate::ports::error::{BackendErrorKind, Error};
use crate::ports::readmodels::ReadModelError;

/// Where a repository's statements go, as its spans report it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbEndpoint {
    /// The database name (`db.namespace`).
    pub namespace: Option<String>,
    /// The server's host name or address (`server.address`).
    pub address: Option<String>,
    /// The server's port (`server.port`).
    pub port: Option<u16>,
}

impl DbEndpoint {
    /// The first host and port of a tokio-postgres config, and its database.
    #[cfg(feature = "postgres")]
    pub(crate) fn of_config(config: &tokio_postgres::Config) -> Self {
        use tokio_postgres::config::Host;
        let address = config.get_hosts().first().map(|h| match h {
            Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            Host::Unix(path) => path.display().to_string(),
        });
        Self {
            namespace: config.get_dbname().map(str::to_owned),
            address,
            port: config.get_ports().first().copied(),
        }
    }
}

/// The span of one repository call: `repo_span!(system, table, endpoint, "op")`
/// with `system` a `&'static str`, `table` a `&str` and `endpoint` an
/// `Option<&DbEndpoint>`.
macro_rules! repo_span {
    ($system:expr, $table:expr, $endpoint:expr, $op:literal) => {{
        let endpoint: Option<&$crate::adapters::sql::DbEndpoint> = $endpoint;
        let table: &str = $table;
        tracing::debug_span!(
            concat!("eventsource.readmodel.", $op),
            otel.name = %format_args!("{} {}", $op, table),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            db.system = $system,
            db.system.name = $system,
            db.operation.name = $op,
            db.collection.name = table,
            db.namespace = endpoint.and_then(|e| e.namespace.as_deref()),
            server.address = endpoint.and_then(|e| e.address.as_deref()),
            server.port = endpoint.and_then(|e| e.port),
            error.type = tracing::field::Empty,
            db.response.status_code = tracing::field::Empty,
        )
    }};
}
pub(crate) use repo_span;

/// Runs `call` in `span`, recording the error's type on failure.
pub(crate) async fn traced<T>(
    span: Span,
    call: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let result = call.instrument(span.clone()).await;
    if let Err(e) = &result {
        if !span.is_disabled() {
            let code = e.as_backend().and_then(|b| b.code()).map(|c| c.code());
            span.record("error.type", code.unwrap_or(error_type(e)));
            span.record("db.response.status_code", code);
            span.record("otel.status_code", "ERROR");
        }
    }
    result
}

/// A low-cardinality name for an error (`error.type`) when there is no
/// SQLSTATE or SQLite code to report.
pub(crate) fn error_type(e: &Error) -> &'static str {
    match e {
        Error::ReadModel(r) => match r {
            ReadModelError::NotFound { .. } => "not_found",
            ReadModelError::VersionConflict { .. } => "version_conflict",
            ReadModelError::SchemaMismatch { .. } => "schema_mismatch",
            ReadModelError::InvalidQuery(_) => "invalid_query",
            ReadModelError::InvalidModel(_) => "invalid_model",
            ReadModelError::Serialization { .. } => "serialization",
            ReadModelError::ProjectionFailed { .. } => "projection_failed",
            ReadModelError::NotCaughtUp { .. } => "not_caught_up",
            ReadModelError::SegmentCountChanged { .. } => "segment_count_changed",
        },
        Error::Backend(b) => match b.kind() {
            BackendErrorKind::Connect => "connect",
            BackendErrorKind::PasswordRequired => "password_required",
            BackendErrorKind::NotPostgres => "not_postgres",
            BackendErrorKind::Query => "query",
            BackendErrorKind::Closed => "closed",
            BackendErrorKind::NoAnswer => "timeout",
            BackendErrorKind::Standby => "standby",
            BackendErrorKind::Tls => "tls",
            _ => "backend",
        },
        Error::InvalidArgument(_) => "invalid_argument",
        _ => "_OTHER",
    }
}
