//! Shared SQL machinery for the read-model adapters.
//!
//! - [`schema`]: DDL for PostgreSQL and SQLite from field descriptors, and
//!   additive migrations.
//! - [`SqlTable`]: the repository statements both SQL adapters run, with
//!   the query semantics spelled out once.
//! - [`ReadModelProjection`]: events to handlers, one transaction per event,
//!   retries with backoff; [`ProjectionRunner`]: the one runner of a
//!   projection, tailing an event feed; [`SegmentedRunner`]: one of several
//!   runners sharing a projection split into [`Segment`]s by partition key.
//! - [`connect`] / [`Database`] (features `postgres` / `sqlite`): the
//!   connection factory, from a `postgres://` or `sqlite://` URL.

pub mod schema;
mod schema_migrate_indexes;
mod schema_types;

mod batch_idle;
mod catch_up;
mod checkpoints;
mod dead_letter_policy;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod connection;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod database_url;
mod outage;
mod progress_samples;
mod projection;
mod projection_apply;
mod rebuild;
mod rebuild_steps;
mod retry;
mod runner;
mod runner_dead_letters;
mod runner_metrics;
mod segment_share;
mod segment_slots;
mod segmented_runner;
mod segments;
mod statements;
pub(crate) mod telemetry;

pub use batch_idle::DEFAULT_BATCH_IDLE_TIMEOUT;
pub use checkpoints::{CheckpointSql, CHECKPOINT_TABLE};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "postgres", feature = "sqlite"))))]
pub use connection::{connect, AnyReadModelRepository, Database};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "postgres", feature = "sqlite"))))]
pub use database_url::DatabaseUrl;
pub use dead_letter_policy::DeadLetterPolicy;
pub use outage::DEFAULT_RECONNECT_PATIENCE;
pub use projection::{CatchUp, ReadModelProjection};
pub use rebuild::{ProjectionRebuild, RebuildSummary};
pub use retry::{is_transient, RetryPolicy};
pub use runner::{ProjectionRunner, RunSummary, DEFAULT_BATCH_SIZE};
pub use runner_dead_letters::Replayed;
pub use segment_share::RunnerCensus;
pub use segment_slots::SegmentedSummary;
pub use segmented_runner::{SegmentedRunner, DEFAULT_RECHECK};
pub use segments::{partition_hash, Segment, SegmentFeed, MAX_SEGMENTS};
#[cfg(feature = "sqlite")]
pub(crate) use statements::SQLITE_DECIMAL_COLLATION;
pub use statements::{Param, SqlTable, Statement};
pub use telemetry::DbEndpoint;

/// The SQL dialect a statement is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// SQLite (3.35 or later: `RETURNING`, `NULLS LAST`).
    Sqlite,
}

impl std::str::FromStr for Dialect {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" | "pg" => Ok(Dialect::Postgres),
            "sqlite" | "sqlite3" => Ok(Dialect::Sqlite),
            _ => Err(crate::Error::InvalidArgument(format!(
                "unknown SQL dialect {s:?} (expected postgres or sqlite)"
            ))),
        }
    }
}

/// Quotes an identifier: `"` around it, embedded `"` doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
