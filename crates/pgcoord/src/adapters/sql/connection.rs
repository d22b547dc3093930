//! The connection factory: a [`Database`] from a `postgres://` or
//! `sqlite://` URL, and [`AnyReadModelRepository`], a repository on
//! whichever backend the URL named.
//!
//! The URL forms are documented on [`connect`].

use std::fmt;
use uuid::Uuid;

use crate::ports::error::Result;
use crate::ports::readmodels::{
    Applied, DeadLetter, DeadLetterSelection, HeldBatch, HoldingBatch, Parking, Query, ReadModel,
    ReadModelHandler, ReadModelRepository, TransactionalReadModels,
};

#[cfg(feature = "postgres")]
use crate::adapters::postgres::{PostgresDatabase, PostgresReadModelRepository};
#[cfg(feature = "sqlite")]
use crate::adapters::sqlite::{SqliteDatabase, SqliteReadModelRepository};

use super::database_url::DatabaseUrl;
use super::Dialect;

/// A connected read-model database, PostgreSQL or SQLite.
#[derive(Clone)]
#[non_exhaustive]
pub enum Database {
    /// A PostgreSQL pool.
    #[cfg(feature = "postgres")]
    Postgres(PostgresDatabase),
    /// A SQLite connection.
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteDatabase),
}

/// Connects to the database a URL names.
///
/// SQLite URLs follow SQLAlchemy's convention (what the reference library
/// and its users write):
///
/// | URL | database |
/// |---|---|
/// | `postgres://user:pw@host:5432/db`, `postgresql://...` | a [`PostgresDatabase`](crate::adapters::postgres::PostgresDatabase) pool (feature `postgres`), TLS parameters included |
/// | `sqlite://`, `sqlite:///:memory:` (also `sqlite::memory:`, `sqlite://:memory:`) | a private in-memory SQLite database: one shared connection (feature `sqlite`) |
/// | `sqlite:///relative/path.db` | the file `relative/path.db`, relative to the working directory |
/// | `sqlite:////absolute/path.db` | the file `/absolute/path.db` |
/// | `sqlite:path.db` | the file `path.db` (relative) |
///
/// A `+driver` suffix on the scheme (`postgresql+asyncpg://`,
/// `postgresql+psycopg://`, `sqlite+aiosqlite://`) is ignored, so URLs
/// written for other toolkits work unchanged; so is a `?query` on SQLite
/// URLs. The path is percent-decoded. `sqlite://host/...` (a host part) is
/// refused: SQLite has no host. SQLite connections get `foreign_keys=ON`,
/// `busy_timeout=5000` and (files only) `journal_mode=WAL`.
///
/// Fails with [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an unknown scheme or a backend
/// whose cargo feature is off, and with a backend error when the database
/// cannot be reached.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// # #[cfg(feature = "sqlite")] {
/// use pgcoord::readmodels::{connect, Dialect};
/// let db = connect("sqlite::memory:").await?;
/// assert_eq!(db.dialect(), Dialect::Sqlite);
/// # }
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
///
/// # Cancel safety
///
/// Dropped, no connection is kept.
pub async fn connect(url: &str) -> Result<Database> {
    match DatabaseUrl::parse(url)? {
        #[cfg(feature = "postgres")]
        DatabaseUrl::Postgres(u) => Ok(Database::Postgres(PostgresDatabase::connect(&u).await?)),
        #[cfg(feature = "sqlite")]
        DatabaseUrl::SqliteMemory => Ok(Database::Sqlite(SqliteDatabase::open_in_memory().await?)),
        #[cfg(feature = "sqlite")]
        DatabaseUrl::SqliteFile(path) => Ok(Database::Sqlite(SqliteDatabase::open(path).await?)),
        #[allow(unreachable_patterns)]
        other => Err(super::database_url::feature_missing(other.dialect())),
    }
}

impl Database {
    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "sqlite")]
            Database::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// A repository for `M` on this database.
    pub fn repository<M: ReadModel>(&self) -> AnyReadModelRepository<M> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => AnyReadModelRepository::Postgres(db.repository()),
            #[cfg(feature = "sqlite")]
            Database::Sqlite(db) => AnyReadModelRepository::Sqlite(db.repository()),
        }
    }

    /// Creates `M`'s table and indexes when missing.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the DDL ran or did not.
    pub async fn create_schema<M: ReadModel>(&self) -> Result<()> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => db.create_schema::<M>().await,
            #[cfg(feature = "sqlite")]
            Database::Sqlite(db) => db
                .create_schema::<M>()
                .await
                .map_err(|e| super::schema::explain_schema_error(&M::table_name(), e)),
        }
    }

    /// Adds `M`'s missing columns (creating the table when missing); returns
    /// the statements run.
    ///
    /// # Cancel safety
    ///
    /// The migration is one transaction: dropped, all or none of it happened.
    pub async fn migrate_schema<M: ReadModel>(&self) -> Result<Vec<String>> {
        // PostgreSQL's repository explains its own failures.
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => db.migrate_schema::<M>().await,
            #[cfg(feature = "sqlite")]
            Database::Sqlite(db) => db
                .migrate_schema::<M>()
                .await
                .map_err(|e| super::schema::explain_schema_error(&M::table_name(), e)),
        }
    }
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => f.debug_tuple("Postgres").field(db).finish(),
            #[cfg(feature = "sqlite")]
            Database::Sqlite(db) => f.debug_tuple("Sqlite").field(db).finish(),
        }
    }
}

/// A read-model repository on the backend a [`Database`] was connected to.
#[non_exhaustive]
pub enum AnyReadModelRepository<M> {
    /// On PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(PostgresReadModelRepository<M, PostgresDatabase>),
    /// On SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteReadModelRepository<M>),
    #[doc(hidden)]
    _Unused(
        std::marker::PhantomData<fn() -> M>,
        std::convert::Infallible,
    ),
}

impl<M> Clone for AnyReadModelRepository<M> {
    fn clone(&self) -> Self {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(r) => Self::Postgres(r.clone()),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(r) => Self::Sqlite(r.clone()),
            Self::_Unused(_, never) => match *never {},
        }
    }
}

impl<M> fmt::Debug for AnyReadModelRepository<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(r) => r.fmt(f),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(r) => r.fmt(f),
            Self::_Unused(_, never) => match *never {},
        }
    }
}

macro_rules! delegate {
    ($self:ident, $repo:ident => $call:expr) => {
        match $self {
            #[cfg(feature = "postgres")]
            Self::Postgres($repo) => $call,
            #[cfg(feature = "sqlite")]
            Self::Sqlite($repo) => $call,
            Self::_Unused(_, never) => match *never {},
        }
    };
}

impl<M: ReadModel> ReadModelRepository<M> for AnyReadModelRepository<M> {
    async fn get(&self, id: Uuid) -> Result<Option<M>> {
        delegate!(self, r => r.get(id).await)
    }
    async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<M>> {
        delegate!(self, r => r.get_many(ids).await)
    }
    async fn save(&self, model: &M) -> Result<M> {
        delegate!(self, r => r.save(model).await)
    }
    async fn save_many(&self, models: &[M]) -> Result<Vec<M>> {
        delegate!(self, r => r.save_many(models).await)
    }
    async fn delete(&self, id: Uuid) -> Result<bool> {
        delegate!(self, r => r.delete(id).await)
    }
    async fn soft_delete(&self, id: Uuid) -> Result<bool> {
        delegate!(self, r => r.soft_delete(id).await)
    }
    async fn restore(&self, id: Uuid) -> Result<bool> {
        delegate!(self, r => r.restore(id).await)
    }
    async fn get_deleted(&self, id: Uuid) -> Result<Option<M>> {
        delegate!(self, r => r.get_deleted(id).await)
    }
    async fn find_deleted(&self, query: &Query) -> Result<Vec<M>> {
        delegate!(self, r => r.find_deleted(query).await)
    }
    async fn exists(&self, id: Uuid) -> Result<bool> {
        delegate!(self, r => r.exists(id).await)
    }
    async fn find(&self, query: &Query) -> Result<Vec<M>> {
        delegate!(self, r => r.find(query).await)
    }
    async fn find_one(&self, query: &Query) -> Result<Option<M>> {
        delegate!(self, r => r.find_one(query).await)
    }
    async fn count(&self, query: &Query) -> Result<u64> {
        delegate!(self, r => r.count(query).await)
    }
    async fn truncate(&self) -> Result<u64> {
        delegate!(self, r => r.truncate().await)
    }
    async fn save_with_version_check(&self, model: &M) -> Result<M> {
        delegate!(self, r => r.save_with_version_check(model).await)
    }
}

impl<M: ReadModel> TransactionalReadModels<M> for AnyReadModelRepository<M> {
    async fn apply<H>(&self, handler: &H, event: &H::Event) -> Result<()>
    where
        H: ReadModelHandler<Model = M>,
    {
        delegate!(self, r => r.apply(handler, event).await)
    }

    async fn truncate_all(&self) -> Result<u64> {
        delegate!(self, r => r.truncate_all().await)
    }

    async fn prepare_checkpoints(&self) -> Result<()> {
        delegate!(self, r => r.prepare_checkpoints().await)
    }

    async fn checkpoint(&self, projection: &str) -> Result<Option<i64>> {
        delegate!(self, r => r.checkpoint(projection).await)
    }

    async fn checkpoint_names(&self, prefix: &str) -> Result<Vec<String>> {
        delegate!(self, r => r.checkpoint_names(prefix).await)
    }

    async fn apply_at<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<Applied>
    where
        H: ReadModelHandler<Model = M>,
    {
        delegate!(self, r => r.apply_at(projection, position, handler, event).await)
    }

    async fn apply_batch_at<H>(
        &self,
        projection: &str,
        events: &[(i64, &H::Event)],
        handler: &H,
    ) -> Result<u64>
    where
        H: ReadModelHandler<Model = M>,
    {
        delegate!(self, r => r.apply_batch_at(projection, events, handler).await)
    }

    async fn reset(&self, projection: &str) -> Result<u64> {
        delegate!(self, r => r.reset(projection).await)
    }

    async fn prepare_dead_letters(&self) -> Result<()> {
        delegate!(self, r => r.prepare_dead_letters().await)
    }

    async fn apply_batch_holding<H>(
        &self,
        projection: &str,
        batch: &HoldingBatch<'_, H::Event>,
        handler: &H,
    ) -> Result<HeldBatch>
    where
        H: ReadModelHandler<Model = M>,
    {
        delegate!(self, r => r.apply_batch_holding(projection, batch, handler).await)
    }

    async fn park(&self, projection: &str, parking: &Parking) -> Result<bool> {
        delegate!(self, r => r.park(projection, parking).await)
    }

    async fn dead_letters(
        &self,
        projection: &str,
        which: &DeadLetterSelection,
    ) -> Result<Vec<DeadLetter>> {
        delegate!(self, r => r.dead_letters(projection, which).await)
    }

    async fn count_dead_letters(&self, projection: &str) -> Result<u64> {
        delegate!(self, r => r.count_dead_letters(projection).await)
    }

    async fn remove_dead_letters(
        &self,
        projection: &str,
        which: &DeadLetterSelection,
    ) -> Result<u64> {
        delegate!(self, r => r.remove_dead_letters(projection, which).await)
    }

    async fn apply_dead_letter<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<bool>
    where
        H: ReadModelHandler<Model = M>,
    {
        delegate!(self, r => r.apply_dead_letter(projection, position, handler, event).await)
    }

    async fn record_dead_letter_failure(
        &self,
        projection: &str,
        position: i64,
        error: &str,
    ) -> Result<()> {
        delegate!(self, r => r.record_dead_letter_failure(projection, position, error).await)
    }
}
