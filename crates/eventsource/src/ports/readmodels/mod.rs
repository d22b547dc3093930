//! Read-model contracts: the model trait, queries and the repository port.

mod error;

pub use error::ReadModelError;
