//! Read-model contracts: the model trait, queries, the repository port and
//! the projection contract. Nothing here talks to a database; users reach
//! these names through the public `crate::readmodels` module.

mod bounds;
mod checked;
mod dead_letter;
mod error;
mod feed;
mod field;
mod field_type;
mod idle_bound;
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
pub(crate) use idle_bound::{batch_idle_bound, set_local_idle_timeout, with_batch_idle_bound};
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
