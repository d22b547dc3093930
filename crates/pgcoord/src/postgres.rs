//! The PostgreSQL lock manager's configuration and its PostgreSQL-only
//! extras (feature `postgres`).
//!
//! [`PostgresLockManager`](crate::PostgresLockManager) and
//! [`ConnectOptions`](crate::ConnectOptions) are at the crate root; here
//! are the builder, the connection settings, fencing inside a writer's own
//! transaction ([`fencing`]), transaction-scoped locks
//! ([`acquire_xact`], [`try_acquire_xact`]), the run log of
//! [`once_per`](crate::coordination::once_per), and the report of
//! [`PostgresLockManager::verify`](crate::PostgresLockManager::verify).

pub use crate::adapters::postgres::{
    acquire_xact, fencing, try_acquire_xact, LibpqEnv, PasswordSource, PostgresLockManagerBuilder,
    PostgresRunLog, Replication, SslMode, VerifyProblem, VerifyReport, XactLock, XACT_ANSWER_GRACE,
};
