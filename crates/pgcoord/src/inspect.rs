//! Looking at a server's advisory locks from outside a manager (feature
//! `postgres`): who holds and who waits, as `eventsource lock list` and
//! `lock top` show them.
//!
//! [`connect_for_inspection`] opens a plain session (no lock manager);
//! [`query_holders`] reads `pg_locks` joined with `pg_stat_activity` into
//! [`AdvisoryLock`] rows, and [`FenceTable`] reads the fence counters.

pub use crate::adapters::postgres::{
    connect_for_inspection, query_holders, split_ssl_params, AdvisoryLock, FenceTable,
    HoldersQuery, LockSession, SslParams,
};
