//! # eventsource
//!
//! Cross-process locks on PostgreSQL session-level advisory locks, and the
//! start of an event-sourcing toolkit (read models), built as ports and
//! adapters.
//!
//! (The guide is written in `lib.rs` once the adapters land.)

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod adapters;
pub mod ports;

#[cfg(feature = "testing")]
pub mod testing;

pub use ports::error::{
    AcquireFailure, BackendError, BackendErrorKind, Error, LockAcquisitionError, LockLostError,
    LockNotHeldError, ReadModelError, Result,
};
pub use ports::lock_id::{lock_id_for_key, MAX_KEY_LEN};
pub use ports::locks::{
    migration_lock_key, DistributedLock, LockGuard, LockInfo, LockRegistry, LossSignal,
    DEFAULT_MIGRATION_OPERATION,
};

pub use adapters::memory::InMemoryLockManager;
#[cfg(feature = "postgres")]
pub use adapters::postgres::PostgresLockManager;
