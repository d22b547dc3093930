//! [`SqliteDatabase`]: one SQLite connection, owned by a thread of its
//! own and driven from async code.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusqlite::Connection;

use crate::adapters::sql::{schema, Dialect};
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::ReadModel;

use super::connection::{configure, table_columns};
use super::error::{connect_error, sqlite_error};
use super::worker::{inline_allowed, outcome, Worker};

/// One SQLite connection, shared by the repositories made from it.
///
/// Cheap to clone: clones share the connection. Calls run in the order
/// they were made, and never block the runtime's other tasks: on a
/// multi-thread runtime each runs on the caller's thread inside
/// [`tokio::task::block_in_place`] (which first hands that worker's other
/// tasks to another thread), on a current-thread runtime on a thread of the
/// database's own (named `eventsource-sqlite`). That thread also keeps the
/// connection and closes it when the last clone (and the last repository or
/// transaction made from it) is dropped; that drop waits for the thread to
/// run the calls queued before and to close the connection (which, for a
/// file, checkpoints the WAL into it and removes the `-wal` and `-shm`
/// files), so the file is complete when it returns, even if the program
/// exits right after. The wait is brief and safe in async code: nothing
/// new can be queued, and what was queued needs nothing of the dropping
/// thread. A `SqliteTransaction` holds an async gate
/// from `BEGIN` to `COMMIT`/`ROLLBACK`, so other users of the database wait
/// for it instead of seeing (or joining) its uncommitted writes. A call
/// whose closure panics returns an error; the database goes on working.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use pgcoord::readmodels::sqlite::SqliteDatabase;
/// let db = SqliteDatabase::open_in_memory().await?;
/// assert_eq!(db.pragma("foreign_keys").await?, "1");
/// assert_eq!(db.pragma("busy_timeout").await?, "5000");
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteDatabase {
    shared: Arc<Shared>,
}

struct Shared {
    worker: Worker,
    gate: Arc<tokio::sync::Mutex<()>>,
    path: Option<PathBuf>,
}

/// How a repository reaches the connection.
#[derive(Clone)]
pub(crate) enum Access {
    /// Through the gate, one call at a time, each in autocommit mode.
    Gated,
    /// Inside an open transaction that holds the gate; `false` once it ended.
    InTransaction(Arc<AtomicBool>),
}

impl SqliteDatabase {
    /// Opens (creating if needed) the database file at `path`, with
    /// `foreign_keys=ON`, `journal_mode=WAL` and `busy_timeout=5000`.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the connection (if it was opened) is closed again.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let p = path.clone();
        let worker = Worker::start(move || {
            let conn = Connection::open(&p).map_err(|e| connect_error(&p, e))?;
            configure(&conn, Some(&p))?;
            Ok(conn)
        })
        .await?;
        Ok(Self::with_worker(worker, Some(path)))
    }

    /// Opens a private in-memory database: one connection, shared by every
    /// clone, with `foreign_keys=ON` and `busy_timeout=5000` (WAL does not
    /// apply to memory databases).
    ///
    /// # Cancel safety
    ///
    /// Dropped, the database is discarded.
    pub async fn open_in_memory() -> Result<Self> {
        let worker = Worker::start(|| {
            let conn = Connection::open_in_memory()
                .map_err(|e| connect_error(Path::new(":memory:"), e))?;
            configure(&conn, None)?;
            Ok(conn)
        })
        .await?;
        Ok(Self::with_worker(worker, None))
    }

    /// The gate a transaction holds from `BEGIN` to its end.
    pub(super) fn gate(&self) -> Arc<tokio::sync::Mutex<()>> {
        self.shared.gate.clone()
    }

    /// The queue to the database's thread and the connection.
    pub(super) fn worker(&self) -> &Worker {
        &self.shared.worker
    }

    fn with_worker(worker: Worker, path: Option<PathBuf>) -> Self {
        Self {
            shared: Arc::new(Shared {
                worker,
                gate: Arc::new(tokio::sync::Mutex::new(())),
                path,
            }),
        }
    }

    /// True for an in-memory database.
    pub fn is_memory(&self) -> bool {
        self.shared.path.is_none()
    }

    /// The file path, for a file database.
    pub fn path(&self) -> Option<&Path> {
        self.shared.path.as_deref()
    }

    /// Runs `f` with the connection after the gate: on this thread inside
    /// [`tokio::task::block_in_place`] on a multi-thread runtime, else on
    /// the database's thread. For queries this crate does not provide. A
    /// panic in `f` comes back as an error; `?` turns rusqlite's errors
    /// into the crate's.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use pgcoord::readmodels::sqlite::SqliteDatabase;
    ///
    /// let db = SqliteDatabase::open_in_memory().await?;
    /// let answer: i64 = db
    ///     .call(|conn| Ok(conn.query_row("SELECT 41 + 1", [], |row| row.get(0))?))
    ///     .await?;
    /// assert_eq!(answer, 42);
    /// let bad = db.call(|conn| Ok(conn.execute_batch("NOT SQL")?)).await;
    /// assert!(bad.unwrap_err().to_string().contains("syntax error"));
    /// # Ok::<(), pgcoord::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropped while waiting for the gate (or for calls queued before it),
    /// `f` does not run; once it started, or was queued to the database's
    /// thread, it runs to completion and its result is lost.
    pub async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        self.run(&Access::Gated, f).await
    }

    pub(crate) async fn run<T, F>(&self, access: &Access, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let in_transaction = match access {
            Access::Gated => None,
            Access::InTransaction(active) => {
                if !active.load(Ordering::Acquire) {
                    return Err(transaction_ended());
                }
                Some(active.clone())
            }
        };
        // What every path checks with the connection before `f`: a gated
        // call rolls back a transaction a cancelled call left open; a call
        // of a transaction that was dropped meanwhile (its rollback queued
        // ahead of this call, maybe run already) must not run.
        let f = move |conn: &mut Connection| {
            match &in_transaction {
                None => discard_leaked_transaction(conn),
                Some(active) if !active.load(Ordering::Acquire) => {
                    return Err(transaction_ended());
                }
                Some(_) => {}
            }
            f(conn)
        };
        if !inline_allowed() {
            return Box::pin(self.run_queued(access, f)).await;
        }
        // The common case, without an await: the gate free (a free gate
        // has no waiters: tokio's mutex hands a released permit straight to
        // the first waiter) or held by this call's transaction, and nothing
        // queued, checked while the gate is held. Anything else takes the
        // boxed path, which keeps this future small.
        {
            let gate = match access {
                Access::Gated => match self.shared.gate.try_lock() {
                    Ok(gate) => Some(gate),
                    Err(_) => return Box::pin(self.run_here_in_turn(access, f)).await,
                },
                Access::InTransaction(_) => None,
            };
            if self.shared.worker.pending() == 0 {
                return self.shared.worker.run_inline(f);
            }
            drop(gate);
        }
        Box::pin(self.run_here_in_turn(access, f)).await
    }

    /// The gate for a gated call (a transaction's calls run under its
    /// transaction's hold). Taken before a statement runs or is queued, so
    /// it comes after every statement of a transaction that ended before
    /// and before the `BEGIN` of any that starts after.
    async fn gate_for(&self, access: &Access) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match access {
            Access::Gated => Some(self.shared.gate.lock().await),
            Access::InTransaction(_) => None,
        }
    }

    /// [`SqliteDatabase::run`] on the caller's thread, after the gate and
    /// after what was queued before.
    async fn run_here_in_turn<T, F>(&self, access: &Access, f: F) -> Result<T>
    where
        F: FnOnce(&mut Connection) -> Result<T>,
    {
        let _gate = self.gate_for(access).await;
        self.shared.worker.run_here(f).await
    }

    /// [`SqliteDatabase::run`] queued to the database's thread (a
    /// current-thread runtime, where the caller's thread cannot block).
    /// The queue keeps the gate's order, so the gate is released once the
    /// call is queued, not held while it runs.
    async fn run_queued<T, F>(&self, access: &Access, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let receiver = {
            let _gate = self.gate_for(access).await;
            self.shared.worker.submit(f)?
        };
        outcome(receiver).await
    }

    /// The value of a pragma, as text (`PRAGMA name`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub async fn pragma(&self, name: &str) -> Result<String> {
        let sql = format!("PRAGMA {name}");
        self.call(move |c| {
            c.query_row(&sql, [], |row| {
                let v: rusqlite::types::Value = row.get(0)?;
                Ok(match v {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    rusqlite::types::Value::Real(r) => r.to_string(),
                    _ => String::new(),
                })
            })
            .map_err(sqlite_error)
        })
        .await
    }

    /// Runs a script of `;`-separated statements.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the script still runs to completion.
    pub async fn execute_batch(&self, sql: &str) -> Result<()> {
        let sql = sql.to_owned();
        self.call(move |c| c.execute_batch(&sql).map_err(sqlite_error))
            .await
    }

    /// Creates `M`'s table and indexes when missing
    /// ([`schema::full_schema`]).
    ///
    /// # Cancel safety
    ///
    /// Dropped, the DDL still runs to completion.
    pub async fn create_schema<M: ReadModel>(&self) -> Result<()> {
        self.execute_batch(&schema::full_schema::<M>(Dialect::Sqlite))
            .await
    }

    /// Adds the columns `M` declares that its table lacks (see
    /// [`schema::migration`]), creating the table first when it does not
    /// exist. Returns the statements run.
    ///
    /// # Cancel safety
    ///
    /// The migration runs in one transaction on the database's thread;
    /// dropped, it still completes.
    pub async fn migrate_schema<M: ReadModel>(&self) -> Result<Vec<String>> {
        let table = M::table_name();
        let create = schema::full_schema::<M>(Dialect::Sqlite);
        self.call(move |c| {
            let existing = table_columns(c, &table)?;
            if existing.is_empty() {
                c.execute_batch(&create).map_err(sqlite_error)?;
                return Ok(vec![create]);
            }
            let statements = schema::generate_migration::<M>(Dialect::Sqlite, &existing)?;
            let tx = c.transaction().map_err(sqlite_error)?;
            for s in &statements {
                tx.execute_batch(s).map_err(sqlite_error)?;
            }
            tx.commit().map_err(sqlite_error)?;
            Ok(statements)
        })
        .await
    }

    /// The column names of `table` (empty when it does not exist).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub async fn columns(&self, table: &str) -> Result<Vec<String>> {
        let table = table.to_owned();
        self.call(move |c| table_columns(c, &table)).await
    }
}

impl fmt::Debug for SqliteDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteDatabase")
            .field("path", &self.shared.path)
            .finish()
    }
}

/// The error of a call on a repository whose transaction has ended.
fn transaction_ended() -> Error {
    Error::InvalidArgument("the SQLite transaction this repository was bound to has ended".into())
}

/// Rolls back a transaction left open outside a [`SqliteTransaction`] (a
/// closure given to [`SqliteDatabase::call`] that began one and did not end
/// it). Only run by calls queued while holding the gate, when no
/// [`SqliteTransaction`] is live, so an open transaction here is a leak.
pub(super) fn discard_leaked_transaction(conn: &Connection) {
    if !conn.is_autocommit() {
        tracing::warn!("rolling back a SQLite transaction left open by a cancelled call");
        let _ = conn.execute_batch("ROLLBACK");
    }
}
