//! Adapters: implementations of the ports.
//!
//! - [`memory`]: in-process implementations, for tests.
//! - `postgres` (feature `postgres`): the production lock manager and the
//!   PostgreSQL read-model repository.

pub mod memory;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub mod sql;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub mod sqlite;
