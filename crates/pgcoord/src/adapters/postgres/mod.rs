//! PostgreSQL adapters (feature `postgres`): [`PostgresLockManager`].

// Layers, top to bottom (each imports only from those below it):
//   config (builder), lock_ports, shared_lock_ports -> manager -> acquirer -> wait_line -> session/*
//   -> registry, shared_holds, held_lock, settings, connect, options, tls
mod acquirer;
mod config;
mod connect;
mod connstring;
pub mod fencing;
mod held_lock;
mod holders;
mod inspection;
mod leader_observer;
mod lock_ports;
mod lock_span;
mod manager;
mod metrics;
mod metrics_per_key;
mod options;
mod registry;
mod session;
mod settings;
mod shared_holds;
mod shared_lock_ports;
mod tls;
mod verify;
mod wait_line;
mod xact_lock;

pub use config::PostgresLockManagerBuilder;
pub use connstring::{split_ssl_params, SslParams};
pub use holders::{
    connect_for_inspection, query_holders, AdvisoryLock, FenceTable, HoldersQuery, LockSession,
};
pub use manager::PostgresLockManager;
pub use options::ConnectOptions;
pub use tls::SslMode;
pub use verify::{VerifyProblem, VerifyReport};
pub use xact_lock::{acquire_xact, try_acquire_xact, XactLock, XACT_ANSWER_GRACE};

mod readmodels;
pub use readmodels::{
    ExclusiveClient, PgClientSource, PgGuard, PooledClient, PostgresDatabase,
    PostgresDatabaseBuilder, PostgresReadModelRepository, DEFAULT_POOL_SIZE,
};
