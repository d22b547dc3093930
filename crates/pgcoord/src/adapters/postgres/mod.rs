//! PostgreSQL adapters (feature `postgres`): [`PostgresLockManager`].

// Two parts and their neighbour: `locks` (the lock engine) and
// `readmodels` (the read-model repositories), both on `connection` (options,
// libpq's environment, TLS, connecting). Neither part imports the other,
// except a projection's status naming the runner that holds its lock
// (`readmodels/status.rs` -> `locks::holders`).
mod connection;
mod locks;

pub use connection::connstring::{split_ssl_params, SslParams};
pub use connection::libpq_env::LibpqEnv;
pub use connection::options::ConnectOptions;
pub use connection::resolve::PasswordSource;
pub use connection::tls::SslMode;
pub use locks::config::PostgresLockManagerBuilder;
pub use locks::fencing;
pub use locks::holders::{query_holders, AdvisoryLock, FenceTable, HoldersQuery, LockSession};
pub use locks::inspection_connect::connect_for_inspection;
pub use locks::manager::PostgresLockManager;
pub use locks::run_log::PostgresRunLog;
pub use locks::verify::{Replication, VerifyProblem, VerifyReport};
pub use locks::xact_lock::{acquire_xact, try_acquire_xact, XactLock, XACT_ANSWER_GRACE};

#[cfg(feature = "readmodels")]
mod readmodels;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub use readmodels::{
    count_dead_letters, drop_dead_letters, list_dead_letters, projection_status, request_replay,
    ExclusiveClient, PgClientSource, PgGuard, PooledClient, PostgresCheckpointWatch,
    PostgresDatabase, PostgresDatabaseBuilder, PostgresEventTable, PostgresReadModelRepository,
    PostgresVersionSwitch, ProjectionStatus, RebuildProgress, RunnerInfo, DEAD_LETTER_TABLE,
    DEFAULT_POOL_SIZE, STALL_SECONDS, VERSIONS_TABLE,
};
