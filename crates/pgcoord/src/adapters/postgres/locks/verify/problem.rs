//! [`VerifyProblem`]: why a server cannot give safe session locks, in
//! words an operator can act on (`lock doctor` prints them).

use std::time::Duration;

/// Why a server cannot give safe session locks. Carried as the
/// [`source`](std::error::Error::source) of the
/// [`BackendErrorKind::NotPostgres`](crate::error::BackendErrorKind::NotPostgres) error that `verify` returns, so callers
/// can downcast to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyProblem {
    /// One connection ran two statements on two server sessions.
    #[error(
        "one connection ran two statements on two different server sessions (backend pid {first}, \
         then {second}): a pooler in transaction or statement mode (such as PgBouncer with \
         pool_mode = transaction) is in between, and session advisory locks are not safe behind \
         it; connect to PostgreSQL directly or through a session-mode pool"
    )]
    SessionNotKept {
        /// The backend pid of the earlier statement.
        first: i32,
        /// The backend pid of the later statement.
        second: i32,
    },
    /// A statement prepared on the connection was gone at its next use
    /// (`26000`), or another client's of the same name was there
    /// (`42P05`): the connection's statements reached different server
    /// sessions.
    #[error(
        "the connection's prepared statements were lost or met another client's (SQLSTATE \
         26000 or 42P05): a pooler in transaction or statement mode (such as PgBouncer with \
         pool_mode = transaction) is in between, or a session-mode pool that does not reset \
         its server connections between clients (an empty server_reset_query), and session \
         advisory locks are not safe behind it; connect to PostgreSQL directly or through a \
         session-mode pool that resets (PgBouncer's default DISCARD ALL)"
    )]
    PreparedStatementLost,
    /// Two connections were served by one server session.
    #[error(
        "two connections were served by the same server session (backend pid {pid}): a pooler \
         shares server sessions between clients, and advisory locks are re-entrant per session, \
         so both would get the same lock; connect to PostgreSQL directly or through a \
         session-mode pool"
    )]
    SharedBackend {
        /// The backend pid both connections reported.
        pid: i32,
    },
    /// The lock function said yes, but no lock exists.
    #[error(
        "pg_try_advisory_lock returned true but no advisory lock shows in pg_locks: the advisory \
         lock functions do nothing on this server (CockroachDB, for one, accepts them without \
         locking)"
    )]
    LockNotRecorded,
    /// A second session got a lock the first one held.
    #[error(
        "a second session took the advisory lock the first one held: advisory locks do not \
         exclude on this server"
    )]
    NoConflict,
    /// The first session could not take a fresh, random test key.
    #[error(
        "the first session could not take a free test lock (pg_try_advisory_lock returned false)"
    )]
    TestLockRefused,
    /// The unlock of the test key did not free it.
    #[error("after pg_advisory_unlock, a second session still could not take the test lock")]
    NotReleased,
    /// The two test sessions of one endpoint reached two servers.
    #[error(
        "the two test sessions reached two different servers ({first} and {second}): the \
         endpoint spreads sessions over several servers (a read/write-splitting proxy, a load \
         balancer over replicas), whose advisory locks do not exclude each other; point the URL \
         at the primary itself"
    )]
    SeveralServers {
        /// The first session's server (start time and address).
        first: String,
        /// The second session's.
        second: String,
    },
    /// The server is a hot standby.
    #[error(
        "the server is a standby (pg_is_in_recovery() is true): advisory locks taken there \
         exclude only that standby's own sessions, not holders on the primary; point the URL \
         at the primary"
    )]
    Standby,
    /// A test connection was accepted but its first statement got no
    /// answer in time: a pooler with no server connection free for it.
    #[error("{}", not_served(*connection, *waited))]
    NotServed {
        /// Which test connection: 1 (alone) or 2 (while 1 is open).
        connection: u8,
        /// How long it waited.
        waited: Duration,
    },
    /// An advisory function did not do what PostgreSQL's does.
    #[error("pg_catalog.{function} did not behave as PostgreSQL's does: expected it {expected}")]
    FunctionMisbehaves {
        /// The function, without schema.
        function: String,
        /// What it should have done.
        expected: String,
    },
}

fn not_served(connection: u8, waited: Duration) -> String {
    let waited = waited.as_secs();
    match connection {
        1 => format!(
            "the test connection was accepted but its first statement got no answer within \
             {waited} s: a pooler with no server connection free for this database and user \
             queues it, or a pooler that cannot reach its server (or the server is overloaded)"
        ),
        _ => format!(
            "a second test connection was accepted but got no answer within {waited} s while the \
             first was open: a pooler with one server connection for this database and user \
             (PgBouncer's default_pool_size = 1, or a pool the other clients fill) queues it; \
             the check needs two server sessions at once, and every process that takes locks \
             holds one of its own: raise the pool's size"
        ),
    }
}
