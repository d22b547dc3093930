//! [`PostgresDatabase`]: the read-model connection pool, on deadpool-postgres,
//! connecting with the same URL parser and TLS as the lock manager.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime, TimeoutType,
};
use tokio_postgres::{Client, Config, Statement};

use super::source::{query_error, ExclusiveClient, PgClientSource, PgGuard};
use super::PostgresReadModelRepository;
use crate::adapters::postgres::connection::connect::{connect_error, named_for_tls};
use crate::adapters::postgres::connection::tls::{refuse_weak_direct, MakeRustls, TlsSettings};
use crate::adapters::postgres::ConnectOptions;
use crate::adapters::sql::DbEndpoint;
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};
use crate::ports::readmodels::ReadModel;

/// The default number of connections a [`PostgresDatabase`] lends at once.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// A pool of PostgreSQL connections for the read-model repositories and
/// projections.
///
/// Built on deadpool-postgres: at most `max_size` connections are lent at
/// once; a caller waits at most `wait_timeout` for one; a connection is
/// opened within `create_timeout`; returned connections are checked
/// (`is_closed`) before reuse; each keeps a cache of prepared statements.
/// Connections use the TLS of the URL (`sslmode`, `sslrootcert`), exactly as
/// the lock manager's sessions do. Cheap to clone: clones share the pool.
///
/// ```no_run
/// # async fn demo() -> pgcoord::Result<()> {
/// use std::time::Duration;
/// use pgcoord::{ConnectOptions, readmodels::postgres::PostgresDatabase};
///
/// let db = PostgresDatabase::connect("postgres://app@db.internal/app?sslmode=verify-full").await?;
/// let client = db.get().await?; // derefs to a tokio_postgres::Client
/// client.batch_execute("SELECT 1").await.expect("a live connection");
///
/// let tuned = PostgresDatabase::builder(ConnectOptions::parse("postgres://app@db.internal/app")?)
///     .max_size(32)
///     .wait_timeout(Duration::from_secs(2))
///     .build()?;
/// # drop(tuned);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresDatabase {
    pool: Pool,
    tls: MakeRustls,
    settings: PoolSettings,
    endpoint: std::sync::Arc<DbEndpoint>,
    config: std::sync::Arc<tokio_postgres::Config>,
}

#[derive(Debug, Clone, Copy)]
struct PoolSettings {
    max_size: usize,
    wait_timeout: Duration,
    create_timeout: Duration,
    recycle_timeout: Duration,
}

/// Builds a [`PostgresDatabase`]; see [`PostgresDatabase::builder`].
#[derive(Debug)]
pub struct PostgresDatabaseBuilder {
    options: ConnectOptions,
    settings: PoolSettings,
}

impl PostgresDatabaseBuilder {
    /// The most connections lent at once (at least 1). Default: 8.
    pub fn max_size(mut self, n: usize) -> Self {
        self.settings.max_size = n;
        self
    }

    /// How long [`PostgresDatabase::get`] waits for a free connection
    /// before failing with a [`BackendErrorKind::NoAnswer`] error.
    /// Default: 30 s.
    pub fn wait_timeout(mut self, d: Duration) -> Self {
        self.settings.wait_timeout = d;
        self
    }

    /// How long opening a connection may take. Default: 10 s.
    pub fn create_timeout(mut self, d: Duration) -> Self {
        self.settings.create_timeout = d;
        self
    }

    /// How long checking a returned connection may take. Default: 5 s.
    pub fn recycle_timeout(mut self, d: Duration) -> Self {
        self.settings.recycle_timeout = d;
        self
    }

    /// Builds the pool. Performs no I/O.
    ///
    /// Fails with [`Error::InvalidArgument`] for a size of 0, and for
    /// `sslnegotiation=direct` with a mode that may go without TLS
    /// (`disable`, `prefer`), as libpq refuses it.
    pub fn build(self) -> Result<PostgresDatabase> {
        let s = self.settings;
        if s.max_size == 0 {
            return Err(Error::InvalidArgument(
                "a read-model pool needs max_size >= 1".into(),
            ));
        }
        let (config, tls_settings) = self.options.into_parts();
        refuse_weak_direct(&config, tls_settings.mode)
            .map_err(|why| Error::InvalidArgument(format!("read-model pool: {why}")))?;
        // Hosts given by address alone get their address as TLS name, as
        // the lock sessions' do (`connect::named_for_tls`).
        let config = named_for_tls(&config, &tls_settings).unwrap_or(config);
        let endpoint = std::sync::Arc::new(DbEndpoint::of_config(&config));
        let direct = std::sync::Arc::new(config.clone());
        let tls = MakeRustls::new(tls_settings);
        let manager = Manager::from_config(
            config,
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(s.max_size)
            .wait_timeout(Some(s.wait_timeout))
            .create_timeout(Some(s.create_timeout))
            .recycle_timeout(Some(s.recycle_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("read-model pool: {e}")))?;
        Ok(PostgresDatabase {
            pool,
            tls,
            settings: s,
            endpoint,
            config: direct,
        })
    }
}

impl PostgresDatabase {
    /// A pool for `url` (a `postgres://` URL or `key=value` string, parsed
    /// by [`ConnectOptions::parse`]), checked by opening one connection.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped: a connection opened meanwhile stays in
    /// the pool, which is dropped with it.
    pub async fn connect(url: &str) -> Result<Self> {
        let db = Self::builder(ConnectOptions::parse(url)?).build()?;
        drop(db.get().await?);
        Ok(db)
    }

    /// A builder for `options` (parse a URL into [`ConnectOptions`], read
    /// libpq's environment with [`ConnectOptions::from_env`], or convert a
    /// `tokio_postgres::Config` with `into()`), with the defaults: 8
    /// connections, 30 s wait, 10 s to connect, 5 s to recycle.
    pub fn builder(options: ConnectOptions) -> PostgresDatabaseBuilder {
        PostgresDatabaseBuilder {
            options,
            settings: PoolSettings {
                max_size: DEFAULT_POOL_SIZE,
                wait_timeout: Duration::from_secs(30),
                create_timeout: Duration::from_secs(10),
                recycle_timeout: Duration::from_secs(5),
            },
        }
    }

    /// The driver settings and TLS of the pool's connections, for a
    /// connection of its own outside the pool (a `LISTEN` session).
    pub(crate) fn direct(&self) -> (&tokio_postgres::Config, &MakeRustls) {
        (&self.config, &self.tls)
    }

    /// The deadpool pool underneath (status, resizing, closing).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Closes the pool: lent connections close when given back, and every
    /// later [`get`](Self::get) fails with [`BackendErrorKind::Closed`].
    pub fn close(&self) {
        self.pool.close();
    }

    /// Lends a connection: an idle one, or a new one. Waits at most the
    /// pool's `wait_timeout` while every connection is lent.
    ///
    /// Fails with [`BackendErrorKind::NoAnswer`] when none became free in
    /// time, [`BackendErrorKind::Connect`] when a new one could not be
    /// opened, and [`BackendErrorKind::Closed`] once the pool is closed.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped (a connection being opened is kept by the
    /// pool). Not cancel safe: a dropped call loses its place in the queue of
    /// waiters.
    pub async fn get(&self) -> Result<PooledClient> {
        self.tls.ready().map_err(Error::Backend)?;
        self.pool
            .get()
            .await
            .map(PooledClient)
            .map_err(|e| pool_error(e, &self.settings, self.tls.settings(), &self.config))
    }

    /// A repository for `M` on this pool (the table must exist; see
    /// [`PostgresDatabase::create_schema`]).
    pub fn repository<M: ReadModel>(&self) -> PostgresReadModelRepository<M, PostgresDatabase> {
        PostgresReadModelRepository::new(self.clone())
    }

    /// Creates `M`'s table and indexes when missing.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the DDL (one script, one implicit transaction) ran or did
    /// not.
    pub async fn create_schema<M: ReadModel>(&self) -> Result<()> {
        self.repository::<M>().create_schema().await
    }

    /// Adds the columns `M` declares that its table lacks, creating the
    /// table when missing; returns the statements run.
    ///
    /// # Cancel safety
    ///
    /// The migration runs as one script: dropped, all or none of it
    /// happened.
    pub async fn migrate_schema<M: ReadModel>(&self) -> Result<Vec<String>> {
        self.repository::<M>().migrate_schema().await
    }
}

fn pool_error(e: PoolError, s: &PoolSettings, tls: &TlsSettings, config: &Config) -> Error {
    // Led by the server's address, as the lock manager's connect errors
    // are, when there is one server (the driver walks several itself and
    // does not say which one failed).
    let one_host = config.get_hosts().len().max(config.get_hostaddrs().len()) == 1;
    let at = |e: BackendError| match one_host {
        true => e.in_context(&crate::adapters::postgres::connection::hosts::host_name(
            config,
        )),
        false => e,
    };
    let be = match e {
        PoolError::Timeout(TimeoutType::Wait) => BackendError::new(
            BackendErrorKind::NoAnswer,
            format!(
                "no pooled connection became free within {:?} ({} lent)",
                s.wait_timeout, s.max_size
            ),
        ),
        PoolError::Timeout(TimeoutType::Create) => at(BackendError::new(
            BackendErrorKind::Connect,
            format!("no connection within {:?}", s.create_timeout),
        )),
        PoolError::Timeout(TimeoutType::Recycle) => BackendError::new(
            BackendErrorKind::NoAnswer,
            format!(
                "checking a pooled connection took over {:?}",
                s.recycle_timeout
            ),
        ),
        PoolError::Backend(e) => at(connect_error(e, tls)),
        PoolError::Closed => {
            BackendError::new(BackendErrorKind::Closed, "the read-model pool is closed")
        }
        other => {
            BackendError::new(BackendErrorKind::Other, "read-model pool failure").with_source(other)
        }
    };
    Error::Backend(be)
}

impl fmt::Debug for PostgresDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresDatabase")
            .field("max_size", &status.max_size)
            .field("size", &status.size)
            .field("available", &status.available)
            .field("settings", &self.settings)
            .finish()
    }
}

impl PgClientSource for PostgresDatabase {
    type Client = Client;
    type Guard<'a> = PooledClient;

    async fn client(&self) -> Result<PooledClient> {
        self.get().await
    }

    async fn exclusive(&self) -> Result<Option<ExclusiveClient<'_>>> {
        let client = self.get().await?;
        let cache = client.0.statement_cache.clone();
        Ok(Some(ExclusiveClient::with_statement_cache(client, cache)))
    }

    fn endpoint(&self) -> Option<&DbEndpoint> {
        Some(&self.endpoint)
    }
}

/// A connection lent by a [`PostgresDatabase`]; goes back to the pool when
/// dropped.
pub struct PooledClient(Object);

impl PooledClient {
    /// Closes the connection instead of giving it back (e.g. in the middle
    /// of a transaction a dropped caller left open: the server rolls it
    /// back when the connection goes).
    pub(crate) fn discard(self) {
        drop(Object::take(self.0));
    }
}

impl PgGuard for PooledClient {
    async fn prepare_cached(&self, sql: &str) -> Result<Option<Statement>> {
        self.0
            .prepare_cached(sql)
            .await
            .map(Some)
            .map_err(query_error)
    }
}

impl Deref for PooledClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0
    }
}

impl DerefMut for PooledClient {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl fmt::Debug for PooledClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledClient")
            .field("closed", &self.0.is_closed())
            .finish()
    }
}
