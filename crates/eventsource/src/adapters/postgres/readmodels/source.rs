//! Where the PostgreSQL read-model repository gets its client from:
//! [`PgClientSource`], [`PgTransactionSource`], and [`PostgresDatabase`], a
//! small connection pool.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, Config, GenericClient, NoTls, Transaction};

use crate::adapters::postgres::connect::{connect_error, pg_error};
use crate::ports::error::{BackendErrorKind, Error, Result};
use crate::ports::readmodels::ReadModel;

use super::PostgresReadModelRepository;

/// Lends a PostgreSQL client for the duration of one repository call.
///
/// Implemented for a [`Client`], a caller's [`Transaction`] (the
/// repository then runs inside it and never commits), a
/// `tokio::sync::Mutex<Client>`, the [`PostgresDatabase`] pool, and `&S` /
/// `Arc<S>` of any of them. Implement it for another pool by returning the
/// pool's guard.
pub trait PgClientSource: Send + Sync {
    /// The client type statements run on.
    type Client: GenericClient + Send + Sync;
    /// What [`PgClientSource::client`] lends: derefs to the client and gives
    /// it back when dropped.
    type Guard<'a>: Deref<Target = Self::Client> + Send + 'a
    where
        Self: 'a;

    /// Lends a client.
    ///
    /// # Cancel safety
    ///
    /// Dropped, nothing is lent (a pool may have opened a connection, which
    /// it keeps).
    fn client(&self) -> impl Future<Output = Result<Self::Guard<'_>>> + Send;

    /// True when every lent client is inside a transaction the caller owns:
    /// the repository then never begins or commits one.
    fn in_caller_transaction(&self) -> bool {
        false
    }
}

/// A [`PgClientSource`] that can lend a client exclusively, so that the
/// projection can open a transaction on it.
pub trait PgTransactionSource: PgClientSource {
    /// An exclusively lent client.
    type Exclusive<'a>: DerefMut<Target = Client> + Send + 'a
    where
        Self: 'a;

    /// Lends a client that nobody else uses until the guard is dropped.
    ///
    /// # Cancel safety
    ///
    /// Dropped, nothing is lent.
    fn exclusive(&self) -> impl Future<Output = Result<Self::Exclusive<'_>>> + Send;
}

impl PgClientSource for Client {
    type Client = Client;
    type Guard<'a> = &'a Client;

    async fn client(&self) -> Result<&Client> {
        Ok(self)
    }
}

impl<'t> PgClientSource for Transaction<'t> {
    type Client = Transaction<'t>;
    type Guard<'a>
        = &'a Transaction<'t>
    where
        Self: 'a;

    async fn client(&self) -> Result<&Transaction<'t>> {
        Ok(self)
    }

    fn in_caller_transaction(&self) -> bool {
        true
    }
}

impl PgClientSource for tokio::sync::Mutex<Client> {
    type Client = Client;
    type Guard<'a> = tokio::sync::MutexGuard<'a, Client>;

    async fn client(&self) -> Result<tokio::sync::MutexGuard<'_, Client>> {
        Ok(self.lock().await)
    }
}

impl PgTransactionSource for tokio::sync::Mutex<Client> {
    type Exclusive<'a> = tokio::sync::MutexGuard<'a, Client>;

    async fn exclusive(&self) -> Result<tokio::sync::MutexGuard<'_, Client>> {
        Ok(self.lock().await)
    }
}

impl<S: PgClientSource + ?Sized> PgClientSource for &S {
    type Client = S::Client;
    type Guard<'a>
        = S::Guard<'a>
    where
        Self: 'a;

    fn client(&self) -> impl Future<Output = Result<Self::Guard<'_>>> + Send {
        (**self).client()
    }

    fn in_caller_transaction(&self) -> bool {
        (**self).in_caller_transaction()
    }
}

impl<S: PgTransactionSource + ?Sized> PgTransactionSource for &S {
    type Exclusive<'a>
        = S::Exclusive<'a>
    where
        Self: 'a;

    fn exclusive(&self) -> impl Future<Output = Result<Self::Exclusive<'_>>> + Send {
        (**self).exclusive()
    }
}

impl<S: PgClientSource + ?Sized> PgClientSource for Arc<S> {
    type Client = S::Client;
    type Guard<'a>
        = S::Guard<'a>
    where
        Self: 'a;

    fn client(&self) -> impl Future<Output = Result<Self::Guard<'_>>> + Send {
        (**self).client()
    }

    fn in_caller_transaction(&self) -> bool {
        (**self).in_caller_transaction()
    }
}

impl<S: PgTransactionSource + ?Sized> PgTransactionSource for Arc<S> {
    type Exclusive<'a>
        = S::Exclusive<'a>
    where
        Self: 'a;

    fn exclusive(&self) -> impl Future<Output = Result<Self::Exclusive<'_>>> + Send {
        (**self).exclusive()
    }
}

/// A small pool of PostgreSQL connections (no TLS), for the read-model
/// repositories and projections.
///
/// At most `max_size` connections are lent at once; returned connections
/// are kept for reuse unless they were closed. Cheap to clone: clones share
/// the pool.
///
/// ```no_run
/// # async fn demo() -> eventsource::Result<()> {
/// use eventsource::adapters::postgres::PostgresDatabase;
/// let db = PostgresDatabase::connect("postgres://app@localhost/app").await?;
/// let client = db.get().await?; // a pooled tokio_postgres::Client
/// client.batch_execute("SELECT 1").await.map_err(|e| eventsource::Error::InvalidArgument(e.to_string()))?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresDatabase {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    config: Config,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
    max_size: usize,
}

/// The default number of connections a [`PostgresDatabase`] lends at once.
pub const DEFAULT_POOL_SIZE: usize = 8;

impl PostgresDatabase {
    /// A pool for `url` (`postgres://user:password@host:port/db`), checked by
    /// opening one connection.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the first connection (if opened) is closed again.
    pub async fn connect(url: &str) -> Result<Self> {
        let config: Config = url.parse().map_err(|e: tokio_postgres::Error| {
            Error::InvalidArgument(format!("invalid PostgreSQL URL: {e}"))
        })?;
        let db = Self::with_config(config, DEFAULT_POOL_SIZE);
        drop(db.get().await?);
        Ok(db)
    }

    /// A pool for `config` lending at most `max_size` connections; opens no
    /// connection yet.
    pub fn with_config(config: Config, max_size: usize) -> Self {
        let max_size = max_size.max(1);
        Self {
            inner: Arc::new(PoolInner {
                config,
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(max_size)),
                max_size,
            }),
        }
    }

    /// The connection settings.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Lends a connection: an idle one, or a new one when none is idle.
    /// Waits while `max_size` connections are lent.
    ///
    /// # Cancel safety
    ///
    /// Dropped, nothing is lent; a connection opened meanwhile is closed.
    pub async fn get(&self) -> Result<PooledClient> {
        let permit = self
            .inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::InvalidArgument("the pool is closed".into()))?;
        let reused = {
            let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
            let mut found = None;
            while let Some(c) = idle.pop() {
                if !c.is_closed() {
                    found = Some(c);
                    break;
                }
            }
            found
        };
        let client = match reused {
            Some(c) => c,
            None => {
                let (client, connection) = self
                    .inner
                    .config
                    .connect(NoTls)
                    .await
                    .map_err(|e| Error::Backend(connect_error(e)))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "read-model PostgreSQL connection ended");
                    }
                });
                client
            }
        };
        Ok(PooledClient {
            client: Some(client),
            pool: self.inner.clone(),
            _permit: permit,
        })
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
    /// Dropped, the DDL (one script) ran or did not.
    pub async fn create_schema<M: ReadModel>(&self) -> Result<()> {
        self.repository::<M>().create_schema().await
    }

    /// Adds the columns `M` declares that its table lacks, creating the
    /// table when missing; returns the statements run.
    ///
    /// # Cancel safety
    ///
    /// The migration runs in one transaction: dropped, all or none of it
    /// happened.
    pub async fn migrate_schema<M: ReadModel>(&self) -> Result<Vec<String>> {
        self.repository::<M>().migrate_schema().await
    }
}

impl fmt::Debug for PostgresDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let idle = self.inner.idle.lock().map(|i| i.len()).unwrap_or(0);
        f.debug_struct("PostgresDatabase")
            .field("hosts", &self.inner.config.get_hosts())
            .field("dbname", &self.inner.config.get_dbname())
            .field("max_size", &self.inner.max_size)
            .field("idle", &idle)
            .finish()
    }
}

impl PgClientSource for PostgresDatabase {
    type Client = Client;
    type Guard<'a> = PooledClient;

    async fn client(&self) -> Result<PooledClient> {
        self.get().await
    }
}

impl PgTransactionSource for PostgresDatabase {
    type Exclusive<'a> = PooledClient;

    async fn exclusive(&self) -> Result<PooledClient> {
        self.get().await
    }
}

/// A connection lent by a [`PostgresDatabase`]; goes back to the pool when
/// dropped (unless it was closed).
pub struct PooledClient {
    client: Option<Client>,
    pool: Arc<PoolInner>,
    _permit: OwnedSemaphorePermit,
}

impl Deref for PooledClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.client.as_ref().expect("client present until drop")
    }
}

impl DerefMut for PooledClient {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("client present until drop")
    }
}

impl Drop for PooledClient {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            if !client.is_closed() {
                let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < self.pool.max_size {
                    idle.push(client);
                }
            }
        }
    }
}

impl fmt::Debug for PooledClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledClient")
            .field("closed", &self.client.as_ref().map(Client::is_closed))
            .finish()
    }
}

/// Maps a driver error from a read-model statement.
pub(crate) fn query_error(e: tokio_postgres::Error) -> Error {
    Error::Backend(pg_error(e, BackendErrorKind::Query))
}
