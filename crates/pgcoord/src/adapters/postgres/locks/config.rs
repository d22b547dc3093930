//! [`PostgresLockManagerBuilder`]: how a [`PostgresLockManager`] is made.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::manager::PostgresLockManager;
use super::settings::Settings;
use crate::adapters::postgres::connection::connect::Connector;
use crate::adapters::postgres::connection::options::ConnectOptions;
use crate::adapters::postgres::connection::tls::{refuse_weak_direct, SslMode, TlsSettings};

/// Builds a [`PostgresLockManager`]. No I/O happens until the first lock call.
///
/// ```
/// use std::time::Duration;
/// use pgcoord::PostgresLockManager;
///
/// let locks = PostgresLockManager::builder("postgres://app@db.internal/app".parse()?)
///     .holder_id("billing-worker-7")
///     .max_held_locks(1_000)
///     .liveness_interval(Duration::from_millis(250))
///     .build()?;
/// # drop(locks);
/// # Ok::<(), pgcoord::Error>(())
/// ```
pub struct PostgresLockManagerBuilder {
    config: tokio_postgres::Config,
    settings: Settings,
    connect_timeout: Duration,
    tls: TlsSettings,
    /// Whether `max_batched_sessions` was set; if not, it follows
    /// `batched_sessions` up.
    max_batched_set: bool,
}

impl PostgresLockManagerBuilder {
    pub(crate) fn new(config: tokio_postgres::Config) -> Self {
        use tokio_postgres::config::SslMode as D;
        // The config's own sslmode (it parses up to `require`) is the default.
        let mode = match config.get_ssl_mode() {
            D::Disable => SslMode::Disable,
            D::Require => SslMode::Require,
            _ => SslMode::Prefer,
        };
        Self {
            config,
            settings: Settings::default(),
            connect_timeout: Duration::from_secs(10),
            max_batched_set: false,
            tls: TlsSettings {
                mode,
                ..TlsSettings::default()
            },
        }
    }

    /// A builder for parsed options: their TLS settings, and their
    /// `connect_timeout` when they set one.
    fn from_options(options: ConnectOptions) -> Self {
        let (config, tls) = options.into_parts();
        let timeout = config.get_connect_timeout().copied();
        let mut builder = Self::new(config);
        builder.tls = tls;
        if let Some(t) = timeout {
            builder.connect_timeout = t;
        }
        builder
    }

    /// How sessions use TLS, as libpq's `sslmode`; see [`SslMode`].
    /// Default: the config's own `sslmode` (`prefer` unless set). Query
    /// cancels use the same settings.
    pub fn ssl_mode(mut self, mode: SslMode) -> Self {
        self.tls.mode = mode;
        self
    }

    /// A PEM file of the CA certificates trusted by `verify-ca` and
    /// `verify-full` (libpq's `sslrootcert`). Default:
    /// `~/.postgresql/root.crt`. Read at the first connection.
    pub fn ssl_root_cert(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.root_cert = Some(path.into());
        self
    }

    /// A client certificate and its private key (PEM files; libpq's
    /// `sslcert` and `sslkey`), for servers that authenticate clients by
    /// certificate. Default: `~/.postgresql/postgresql.crt` and
    /// `postgresql.key`, used when the certificate exists. The key file
    /// must not be readable by others (0600, or 0640 owned by root), as
    /// libpq requires. Read at the first connection.
    pub fn ssl_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client_cert = Some(cert.into());
        self.tls.client_key = Some(key.into());
        self
    }

    /// A label for this holder, copied into every `LockInfo::holder_id` and
    /// shown in `pg_stat_activity.application_name` as `eventsource/<id>`
    /// (bytes outside printable ASCII, and `%`, percent-encoded there, as
    /// PostgreSQL would turn them into `?`; the holders listing decodes
    /// them).
    /// [`build`](Self::build) refuses one with a NUL character, which
    /// PostgreSQL refuses in any string.
    pub fn holder_id(mut self, id: impl Into<String>) -> Self {
        self.settings.holder_id = Some(id.into().into());
        self
    }

    /// The most locks this manager holds (or is acquiring) at once; beyond
    /// it, acquisitions fail with `AcquireFailure::BudgetExceeded`.
    ///
    /// PostgreSQL's shared lock table holds roughly
    /// `max_locks_per_transaction × max_connections` locks for the whole
    /// server (about 6,400–12,800 with default settings); when it is full,
    /// the server refuses new connections. At least 1. Default: 4,096.
    pub fn max_held_locks(mut self, n: usize) -> Self {
        self.settings.max_held_locks = n;
        self
    }

    /// How many long-lived sessions carry uncontended locks, their requests
    /// batched. While only the first of them holds locks, and at most
    /// 2,048, new locks go to it, so a light load runs as few, large
    /// statements; otherwise to the one holding fewest locks. At least 1,
    /// at most 262,143 (PostgreSQL's largest `max_connections`). Default: 2.
    pub fn batched_sessions(mut self, n: usize) -> Self {
        self.settings.batched_sessions = n;
        self
    }

    /// The most batched sessions. PostgreSQL walks a session's whole local
    /// lock table at the end of every statement, so a session holding
    /// thousands of locks makes every statement on it slower: while the
    /// open batched sessions hold 5,000 locks or more each on average, the
    /// manager opens one more for new work, up to this many (at least
    /// [`batched_sessions`](Self::batched_sessions): [`build`](Self::build)
    /// refuses fewer, and more than 262,143). Default: 8, or
    /// `batched_sessions` if that is more.
    pub fn max_batched_sessions(mut self, n: usize) -> Self {
        self.settings.max_batched_sessions = n;
        self.max_batched_set = true;
        self
    }

    /// The most dedicated sessions open at once for contended waits (each
    /// waiting or contended-then-granted lock uses one). At least 1, at
    /// most 262,143. Default: 64.
    pub fn max_wait_sessions(mut self, n: usize) -> Self {
        self.settings.max_wait_sessions = n;
        self
    }

    /// How many idle dedicated sessions are kept for the next wait. At most
    /// 262,143. Default: 4.
    pub fn max_idle_wait_sessions(mut self, n: usize) -> Self {
        self.settings.max_idle_wait_sessions = n;
        self
    }

    /// How often an idle session holding locks checks that it is alive.
    /// At least 10 ms. Default: 500 ms.
    pub fn liveness_interval(mut self, d: Duration) -> Self {
        self.settings.liveness_interval = d;
        self
    }

    /// How long a liveness check may take before the session is declared
    /// dead and its locks reported lost. At least 10 ms. Default: 2 s.
    pub fn liveness_timeout(mut self, d: Duration) -> Self {
        self.settings.liveness_timeout = d;
        self
    }

    /// Lock on a hot standby anyway. By default a session that finds
    /// `pg_is_in_recovery()` true refuses to lock
    /// (a [`BackendErrorKind::Standby`](crate::ports::error::BackendErrorKind::Standby) failure):
    /// advisory locks on a standby exclude only that standby's own
    /// sessions, never holders on the primary.
    pub fn allow_standby(mut self, allow: bool) -> Self {
        self.settings.allow_standby = allow;
        self
    }

    /// One database session for everything, for a process that holds one
    /// lock at a time (as `eventsource lock run` does): the try, a contended
    /// wait (run on that same session, which holds nothing else meanwhile)
    /// and [`holders`](PostgresLockManager::holders) all use it. A second
    /// lock while one is held or awaited is refused
    /// ([`AcquireFailure::BudgetExceeded`](crate::ports::error::AcquireFailure::BudgetExceeded)).
    /// Sets `batched_sessions(1)` and `max_held_locks(1)`.
    pub fn single_session(mut self, on: bool) -> Self {
        self.settings.single_session = on;
        if on {
            self.settings.batched_sessions = 1;
            self.settings.max_batched_sessions = 1;
            self.settings.max_held_locks = 1;
        }
        self
    }

    /// Fencing tokens: every acquisition bumps the key's counter in the
    /// `eventsource_lock_fences` table, in the same statement as the grant,
    /// and carries the new value in [`LockInfo::fence`](crate::LockInfo::fence).
    /// A protected write checks it inside its own transaction with
    /// [`fencing::check`](super::fencing::check), which refuses a holder
    /// that a later one has replaced. The table is created once by
    /// [`PostgresLockManager::install_fencing`] (or `eventsource lock
    /// install`), never implicitly; without it, fenced acquisitions fail
    /// with [`BackendErrorKind::FencingNotInstalled`](crate::ports::error::BackendErrorKind::FencingNotInstalled).
    /// Default: off. See `docs/fencing.md`.
    pub fn fencing(mut self, on: bool) -> Self {
        self.settings.fencing = on;
        self
    }

    /// Lease mode: a holder that stops talking to the server (frozen by
    /// SIGSTOP, a VM pause or a long GC, or cut off) loses its locks about
    /// `lease` after its last statement, instead of keeping them until the
    /// kernel gives up on the connection (hours, or never for a frozen
    /// process whose kernel still answers keepalives).
    ///
    /// Every session sets `idle_session_timeout` (PostgreSQL 14 or later;
    /// older servers are refused with a clear error), `tcp_user_timeout`
    /// and the server's TCP keepalives from `lease`, and pings at least four
    /// times per lease while idle. A guard's loss signal fires when its
    /// session has not been confirmed for nine tenths of the lease (at
    /// least 50 ms less than the lease), so the holder knows before the
    /// server can release the lock; the check is made on every
    /// [`is_lost`](crate::LockGuard::is_lost), so a holder that resumes
    /// from a freeze sees it first. At least one second, at most `INT_MAX`
    /// ms (about 24.8 days, PostgreSQL's largest `idle_session_timeout`);
    /// [`build`](Self::build) refuses others. Default: off. See
    /// `docs/fencing.md`.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = Some(lease);
        self
    }

    /// Adds the `key_prefix` label to the acquisition
    /// metrics: each key's part before `separator`, for at most `limit`
    /// distinct prefixes (every later one counts as `other`), so the number
    /// of series stays bounded however many keys there are. Default: no key
    /// attribute at all. See `docs/observability.md`.
    pub fn metrics_key_prefix(mut self, separator: char, limit: usize) -> Self {
        let prefixes = super::metrics::KeyPrefixes::new(separator, limit);
        self.settings.key_prefixes = Some(Arc::new(prefixes));
        self
    }

    /// How long opening a session may take. Default: the options'
    /// `connect_timeout` (from the connection string, or
    /// `PGCONNECT_TIMEOUT` with [`ConnectOptions::from_env`]), else 10 s.
    /// More than zero. An acquisition's own timeout bounds it further.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// Builds the manager. Performs no I/O.
    ///
    /// `sslnegotiation=direct` with an [`ssl_mode`](Self::ssl_mode) that may
    /// go without TLS (`disable`, `prefer`) is refused, as libpq refuses it.
    ///
    /// A setting out of its documented range is an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming it,
    /// never raised or lowered silently:
    ///
    /// ```
    /// use std::time::Duration;
    /// use pgcoord::PostgresLockManager;
    ///
    /// let options = "postgres://app@db.internal/app".parse()?;
    /// let err = PostgresLockManager::builder(options)
    ///     .lease(Duration::from_millis(200))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("lease"), "{err}");
    /// # Ok::<(), pgcoord::Error>(())
    /// ```
    pub fn build(mut self) -> crate::Result<PostgresLockManager> {
        if !self.max_batched_set && !self.settings.single_session {
            let s = &mut self.settings;
            s.max_batched_sessions = s.max_batched_sessions.max(s.batched_sessions);
        }
        self.settings.validate()?;
        if self.connect_timeout.is_zero() {
            return Err(crate::Error::InvalidArgument(
                "connect_timeout must be more than zero".into(),
            ));
        }
        // A mode weakened after parsing (`ssl_mode`, `with_ssl_mode`).
        refuse_weak_direct(&self.config, self.tls.mode).map_err(crate::Error::InvalidArgument)?;
        let connector = Connector::new(
            self.config,
            self.settings.holder_id.as_deref(),
            self.connect_timeout,
            self.tls,
        );
        Ok(PostgresLockManager::from_parts(
            Arc::new(connector),
            self.settings,
        ))
    }
}

impl PostgresLockManager {
    /// Starts building a manager: the one entry point. Parse a
    /// `postgres://` URL or a `key=value` string into [`ConnectOptions`]
    /// with `str::parse`, read libpq's environment with
    /// [`ConnectOptions::from_env`], or convert a `tokio_postgres::Config`
    /// with `into()`.
    ///
    /// ```no_run
    /// use pgcoord::{ConnectOptions, PostgresLockManager};
    ///
    /// let locks = PostgresLockManager::builder("postgres://app@db.internal/app".parse()?)
    ///     .holder_id("worker-7")
    ///     .build()?;
    /// // PGHOST, PGUSER, PGDATABASE, ~/.pgpass, PGSERVICE, ... as psql reads them:
    /// let from_env = PostgresLockManager::builder(ConnectOptions::from_env()?).build()?;
    /// # drop((locks, from_env));
    /// # Ok::<(), pgcoord::Error>(())
    /// ```
    pub fn builder(options: ConnectOptions) -> PostgresLockManagerBuilder {
        PostgresLockManagerBuilder::from_options(options)
    }
}

impl fmt::Debug for PostgresLockManagerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLockManagerBuilder")
            .field("holder_id", &self.settings.holder_id)
            .field("max_held_locks", &self.settings.max_held_locks)
            .field("batched_sessions", &self.settings.batched_sessions)
            .field("max_batched_sessions", &self.settings.max_batched_sessions)
            .field("max_wait_sessions", &self.settings.max_wait_sessions)
            .field("ssl_mode", &self.tls.mode)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
