//! Read models: typed rows kept up to date from events, with repositories
//! for memory, PostgreSQL and SQLite and a projection runner (feature
//! `readmodels`).
//!
//! - The model and its storage: [`ReadModel`] (derive it with
//!   `#[derive(ReadModel)]`, feature `derive`), [`ReadModelRepository`] and
//!   its [`Query`] / [`Filter`] language; [`InMemoryReadModelRepository`]
//!   here, the SQL repositories in `readmodels::postgres` and
//!   `readmodels::sqlite` (features `postgres` and `sqlite`), or either
//!   from a URL with `readmodels::connect` (either feature).
//! - Projections: [`ReadModelHandler`]s fed by an [`EventFeed`], run by a
//!   [`ProjectionRunner`] (one runner, holding the projection's lock) or
//!   [`SegmentedRunner`]s (several, sharing [`Segment`]s), with dead
//!   letters ([`DeadLetterPolicy`]), retries ([`RetryPolicy`]) and rebuilds
//!   without downtime ([`ProjectionRebuild`]).
//! - [`schema`]: the DDL of a model for either database, and migrations;
//!   [`sql`]: the statements the SQL repositories share; [`storage`]: for
//!   implementers of a repository.
//!
//! The guide is `docs/readmodels.md`; runners, dead letters, segments and
//! rebuilds are in `docs/projections.md`.
//!
//! # Query semantics
//!
//! The same on every backend:
//!
//! - Filters are combined with AND.
//! - A NULL field never matches `eq`, `in`, `gt`, `gte`, `lt`, `lte`, and
//!   always matches `ne` and `not_in`.
//! - An empty `in` list matches nothing; an empty `not_in` list matches
//!   everything.
//! - Text compares byte-wise (the `C` collation), whatever the database's
//!   default collation.
//! - One order key; NULLs sort last ascending and first descending; ties
//!   (and queries without an order key) are broken by `id` ascending, so
//!   `limit`/`offset` pages are stable.
//! - Soft-deleted rows are left out unless `include_deleted` is set.
//! - A filter or order key naming an unknown field, an unknown operator, an
//!   operand of the wrong type, or a JSON/bytes field is rejected with
//!   [`ReadModelError::InvalidQuery`](crate::error::ReadModelError::InvalidQuery) before any SQL runs.

pub use crate::ports::readmodels::{
    default_table_name, storage, version_name, warming_up, Applied, CheckpointPublisher, Column,
    DeadLetter, DeadLetterSelection, DefaultValue, Direction, EventFeed, FeedSignal, FeedWakeup,
    FieldDescriptor, FieldKind, FieldType, Filter, HeldBatch, HoldingBatch, IndexDescriptor,
    Operand, Operator, Parking, ProjectionProgress, ProjectionVersions, Query, ReadModel,
    ReadModelHandler, ReadModelMeta, ReadModelRepository, SqlTypeOverride, TransactionalReadModels,
    Value, VersionSwitch, VersionedReadModels,
};

pub use crate::adapters::memory::{InMemoryFeed, InMemoryReadModelRepository};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "postgres", feature = "sqlite"))))]
pub use crate::adapters::sql::{connect, AnyReadModelRepository, Database, DatabaseUrl};
pub use crate::adapters::sql::{
    is_transient, partition_hash, schema, CatchUp, DbEndpoint, DeadLetterPolicy, Dialect,
    ProjectionRebuild, ProjectionRunner, ReadModelProjection, RebuildSummary, Replayed,
    RetryPolicy, RunSummary, RunnerCensus, Segment, SegmentFeed, SegmentedRunner, SegmentedSummary,
    DEFAULT_BATCH_IDLE_TIMEOUT, DEFAULT_BATCH_SIZE, DEFAULT_RECHECK, DEFAULT_RECONNECT_PATIENCE,
    MAX_SEGMENTS,
};

/// The statements the SQL repositories share, for code that runs them
/// itself (a raw baseline, a custom repository).
pub mod sql {
    pub use crate::adapters::sql::{
        quote_ident, CheckpointSql, Param, SqlTable, Statement, CHECKPOINT_TABLE,
    };
}

/// The PostgreSQL repository, its connection pool and what a projection
/// keeps in PostgreSQL: checkpoints, dead letters, versions, status
/// (feature `postgres`).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres {
    pub use crate::adapters::postgres::{
        count_dead_letters, drop_dead_letters, list_dead_letters, projection_status,
        request_replay, ExclusiveClient, PgClientSource, PgGuard, PooledClient,
        PostgresCheckpointWatch, PostgresDatabase, PostgresDatabaseBuilder, PostgresEventTable,
        PostgresReadModelRepository, PostgresVersionSwitch, ProjectionStatus, RebuildProgress,
        RunnerInfo, DEAD_LETTER_TABLE, DEFAULT_POOL_SIZE, STALL_SECONDS, VERSIONS_TABLE,
    };
}

/// The SQLite repository, one dedicated thread per database (feature
/// `sqlite`).
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub mod sqlite {
    pub use crate::adapters::sqlite::{
        SqliteDatabase, SqliteReadModelRepository, SqliteTransaction,
    };
}
