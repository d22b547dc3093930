//! Read-model contracts: the model trait, queries, the repository port and
//! the projection contract.
//!
//! Nothing here talks to a database: the adapters live in
//! [`crate::adapters::memory`], `crate::adapters::postgres` (feature
//! `postgres`), `crate::adapters::sqlite` (feature `sqlite`) and
//! [`crate::adapters::sql`] (schema generation, the projection runner and
//! the connection factory).
//!
//! A guide with a worked example is in `docs/readmodels.md`.
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
//!   [`ReadModelError::InvalidQuery`] before any SQL runs.

mod checked;
mod dead_letter;
mod error;
mod feed;
mod field;
mod field_type;
mod index;
mod kind;
mod meta;
mod model;
mod naming;
mod progress;
mod projection;
mod query;
mod repository;
mod serde_form;
pub mod storage;
mod terms;
mod value;
mod versions;
mod warm_up;

pub use dead_letter::{DeadLetter, DeadLetterSelection, HeldBatch, HoldingBatch, Parking};
pub use error::{Cause, ReadModelError};
pub use feed::{EventFeed, FeedSignal, FeedWakeup};
pub use field::{Column, DefaultValue, FieldDescriptor, SqlTypeOverride};
pub use field_type::FieldType;
pub use index::IndexDescriptor;
pub use kind::FieldKind;
pub use meta::ReadModelMeta;
pub use model::ReadModel;
pub use naming::default_table_name;
pub use progress::{CheckpointPublisher, ProjectionProgress};
pub use projection::{Applied, ReadModelHandler, TransactionalReadModels};
pub use query::{Filter, Query};
pub use repository::ReadModelRepository;
pub use terms::{Direction, Operand, Operator};
pub use value::Value;
pub use versions::{version_name, ProjectionVersions, VersionSwitch, VersionedReadModels};
pub(crate) use warm_up::during_warm_up;
pub use warm_up::warming_up;

/// `#[derive(ReadModel)]` (feature `derive`); see the `pgcoord-derive`
/// crate for its attributes.
#[cfg(feature = "derive")]
#[cfg_attr(docsrs, doc(cfg(feature = "derive")))]
pub use pgcoord_derive::ReadModel;

/// `docs/readmodels.md`, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../../../docs/readmodels.md")]
struct ReadModelsGuide;

/// `docs/projections.md`, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../../../docs/projections.md")]
struct ProjectionsGuide;
