//! PostgreSQL adapters (feature `postgres`): [`PostgresLockManager`].

mod config;
mod connect;
mod held;
mod holders;
mod manager;
mod pool;
mod registry;
mod session;

pub use config::PostgresLockManagerBuilder;
pub use holders::{query_holders, AdvisoryLock, LockSession};
pub use manager::PostgresLockManager;
