//! Where the PostgreSQL read-model repository gets its client from:
//! [`PgClientSource`] and its implementations. The pool is in `pool.rs`.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use deadpool_postgres::StatementCache;
use tokio_postgres::{Client, GenericClient, Statement, Transaction};

use crate::adapters::postgres::connection::connect::pg_error;
use crate::adapters::sql::DbEndpoint;
use crate::ports::error::{BackendErrorKind, Error, Result};

/// A client lent exclusively: nobody else uses it until this is dropped.
/// What [`PgClientSource::exclusive`] lends, for a transaction of the
/// repository's own.
pub struct ExclusiveClient<'a>(
    Box<dyn DerefMut<Target = Client> + Send + 'a>,
    Option<Arc<StatementCache>>,
);

impl<'a> ExclusiveClient<'a> {
    /// Wraps an exclusive guard.
    pub fn new(guard: impl DerefMut<Target = Client> + Send + 'a) -> Self {
        Self(Box::new(guard), None)
    }

    /// Wraps an exclusive guard on a connection with a cache of prepared
    /// statements, which the repository's own transactions on it use.
    pub(crate) fn with_statement_cache(
        guard: impl DerefMut<Target = Client> + Send + 'a,
        cache: Arc<StatementCache>,
    ) -> Self {
        Self(Box::new(guard), Some(cache))
    }

    /// The connection's statement cache, when it has one.
    pub(crate) fn statement_cache(&self) -> Option<Arc<StatementCache>> {
        self.1.clone()
    }
}

impl Deref for ExclusiveClient<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0
    }
}

impl DerefMut for ExclusiveClient<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl fmt::Debug for ExclusiveClient<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExclusiveClient")
            .field("closed", &self.0.is_closed())
            .finish()
    }
}

/// Lends a PostgreSQL client for the duration of one repository call.
///
/// Implemented for the [`PostgresDatabase`](super::PostgresDatabase) pool,
/// a `tokio::sync::Mutex<Client>`, a caller's [`Transaction`] (the
/// repository then runs inside it and never commits), and `&S` / `Arc<S>`
/// of any of them. A bare `Client` is not a source: calls that need a
/// transaction of their own (`save_many` of several statements, the
/// projection's `apply`) could not keep other users of a shared client out
/// of it; wrap it in a `tokio::sync::Mutex`.
pub trait PgClientSource: Send + Sync {
    /// The client type statements run on.
    type Client: GenericClient + Send + Sync;
    /// What [`PgClientSource::client`] lends: derefs to the client and gives
    /// it back when dropped.
    type Guard<'a>: Deref<Target = Self::Client> + PgGuard + Send + 'a
    where
        Self: 'a;

    /// Lends a client.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped. Not cancel safe for a pool or a mutex:
    /// a dropped call loses its place in their wait queue.
    fn client(&self) -> impl Future<Output = Result<Self::Guard<'_>>> + Send;

    /// Lends a client exclusively, for a transaction of the repository's
    /// own; `None` inside a caller's transaction, where every statement
    /// already runs in one.
    ///
    /// # Cancel safety
    ///
    /// As [`PgClientSource::client`].
    fn exclusive(&self) -> impl Future<Output = Result<Option<ExclusiveClient<'_>>>> + Send;

    /// True when every lent client is inside a transaction the caller owns:
    /// the repository then never begins or commits one.
    fn in_caller_transaction(&self) -> bool {
        false
    }

    /// The server the clients talk to, for the repository's spans
    /// (`server.address`, `server.port`, `db.namespace`); `None` when the
    /// source cannot tell (a bare client or a transaction).
    fn endpoint(&self) -> Option<&DbEndpoint> {
        None
    }
}

/// What a [`PgClientSource`] lends, beyond the client itself.
pub trait PgGuard {
    /// A prepared statement for `sql` from a per-connection cache, when the
    /// connection has one (the pool's do). `None` makes the repository send
    /// the statement with its parameter types instead.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, nothing is lost (at worst the statement is
    /// prepared again next time).
    fn prepare_cached<'a>(
        &'a self,
        sql: &'a str,
    ) -> impl Future<Output = Result<Option<Statement>>> + Send + 'a {
        let _ = sql;
        async { Ok(None) }
    }
}

impl PgGuard for &Transaction<'_> {}
impl PgGuard for tokio::sync::MutexGuard<'_, Client> {}

impl<'t> PgClientSource for Transaction<'t> {
    type Client = Transaction<'t>;
    type Guard<'a>
        = &'a Transaction<'t>
    where
        Self: 'a;

    async fn client(&self) -> Result<&Transaction<'t>> {
        Ok(self)
    }

    async fn exclusive(&self) -> Result<Option<ExclusiveClient<'_>>> {
        Ok(None)
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

    async fn exclusive(&self) -> Result<Option<ExclusiveClient<'_>>> {
        Ok(Some(ExclusiveClient::new(self.lock().await)))
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

    fn exclusive(&self) -> impl Future<Output = Result<Option<ExclusiveClient<'_>>>> + Send {
        (**self).exclusive()
    }

    fn in_caller_transaction(&self) -> bool {
        (**self).in_caller_transaction()
    }

    fn endpoint(&self) -> Option<&DbEndpoint> {
        (**self).endpoint()
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

    fn exclusive(&self) -> impl Future<Output = Result<Option<ExclusiveClient<'_>>>> + Send {
        (**self).exclusive()
    }

    fn in_caller_transaction(&self) -> bool {
        (**self).in_caller_transaction()
    }

    fn endpoint(&self) -> Option<&DbEndpoint> {
        (**self).endpoint()
    }
}

/// Maps a driver error from a read-model statement.
pub(crate) fn query_error(e: tokio_postgres::Error) -> Error {
    Error::Backend(pg_error(e, BackendErrorKind::Query))
}
