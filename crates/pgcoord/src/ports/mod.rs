//! Ports: the pure contracts of the crate.
//!
//! Nothing in here talks to a database. Code that only needs "a lock" or
//! "a read-model store" depends on these traits and types, and is tested
//! against the in-memory adapters.

pub(crate) mod alarm;
pub mod backend_error;
pub(crate) mod deadline;
pub mod dyn_lock;
pub mod error;
pub mod fenced;
pub(crate) mod key_limit;
pub mod lock_id;
pub mod lock_mode;
pub mod locks;
pub mod loss;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub mod readmodels;
pub(crate) mod session_end;
pub mod shared_locks;
pub mod sql_state;
