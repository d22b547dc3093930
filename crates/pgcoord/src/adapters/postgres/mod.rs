//! PostgreSQL adapters (feature `postgres`): [`PostgresLockManager`].

// Layers, top to bottom (each imports only from those below it):
//   config (builder), lock_ports, shared_lock_ports -> manager -> acquirer -> wait_line -> session/*
//   -> registry, shared_holds, held_lock, settings, connect, options -> resolve
//   -> libpq_env, passfile, service_file, connstring, tls
mod acquirer;
mod config;
mod connect;
mod connstring;
pub mod fencing;
mod held_lock;
mod holders;
mod inspection;
mod leader_observer;
mod libpq_env;
mod lock_ports;
mod lock_span;
mod manager;
mod metrics;
mod metrics_per_key;
mod options;
mod passfile;
mod registry;
mod resolve;
mod run_log;
mod service_file;
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
pub use libpq_env::LibpqEnv;
pub use manager::PostgresLockManager;
pub use options::ConnectOptions;
pub use resolve::PasswordSource;
pub use run_log::PostgresRunLog;
pub use tls::SslMode;
pub use verify::{Replication, VerifyProblem, VerifyReport};
pub use xact_lock::{acquire_xact, try_acquire_xact, XactLock, XACT_ANSWER_GRACE};

#[cfg(feature = "readmodels")]
mod readmodels;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub use readmodels::{
    count_dead_letters, drop_dead_letters, list_dead_letters, projection_status, request_replay,
    ExclusiveClient, PgClientSource, PgGuard, PooledClient, PostgresCheckpointWatch,
    PostgresDatabase, PostgresDatabaseBuilder, PostgresEventTable, PostgresReadModelRepository,
    ProjectionStatus, RunnerInfo, DEAD_LETTER_TABLE, DEFAULT_POOL_SIZE,
};
