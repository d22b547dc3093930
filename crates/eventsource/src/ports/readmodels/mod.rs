//! Read-model contracts: the model trait, queries, the repository port and
//! the projection contract.
//!
//! Nothing here talks to a database: the adapters live in
//! [`crate::adapters::memory`], `crate::adapters::postgres` (feature
//! `postgres`), `crate::adapters::sqlite` (feature `sqlite`) and
//! [`crate::adapters::sql`] (schema generation, the projection runner and
//! the connection factory).

mod error;
mod model;
mod projection;
mod query;
mod repository;
mod value;

pub use error::ReadModelError;
pub use model::{
    base_fields, default_table_name, now_micros, pluralize, snake_case, DefaultValue,
    FieldDescriptor, FieldType, IndexDescriptor, ReadModel, ReadModelMeta, Record, SqlTypeOverride,
    BASE_COLUMNS,
};
pub use projection::{ReadModelHandler, TransactionalReadModels};
pub use query::{
    CheckedFilter, CheckedOrder, CheckedQuery, DeletedRows, Direction, Filter, Operand, Operator,
    Query,
};
pub use repository::ReadModelRepository;
pub use value::Value;
