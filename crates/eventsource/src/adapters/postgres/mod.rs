//! PostgreSQL adapters (feature `postgres`): [`PostgresLockManager`].

mod config;
mod connect;
mod held;
mod holders;
mod manager;
mod options;
mod pool;
mod registry;
mod session;
mod tls;
mod verify;

pub use config::PostgresLockManagerBuilder;
pub use holders::{query_holders, AdvisoryLock, LockSession};
pub use manager::PostgresLockManager;
pub use options::ConnectOptions;
pub use tls::{split_ssl_params, SslMode, SslParams};
pub use verify::{VerifyProblem, VerifyReport};

mod readmodels;
pub use readmodels::{
    ExclusiveClient, PgClientSource, PgGuard, PooledClient, PostgresDatabase,
    PostgresDatabaseBuilder, PostgresReadModelRepository, DEFAULT_POOL_SIZE,
};
