//! [`SqliteDatabase`]: one SQLite connection, owned by a thread of its
//! own and driven from async code; and [`SqliteTransaction`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusqlite::Connection;
use tokio::sync::OwnedMutexGuard;

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
/// transaction made from it) is dropped. A [`SqliteTransaction`] holds an async gate
/// from `BEGIN` to `COMMIT`/`ROLLBACK`, so other users of the database wait
/// for it instead of seeing (or joining) its uncommitted writes. A call
/// whose closure panics returns an error; the database goes on working.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use pgcoord::adapters::sqlite::SqliteDatabase;
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
            configure(&conn, false)?;
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
            configure(&conn, true)?;
            Ok(conn)
        })
        .await?;
        Ok(Self::with_worker(worker, None))
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
    /// panic in `f` comes back as an error.
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
        let ended = || {
            Error::InvalidArgument(
                "the SQLite transaction this repository was bound to has ended".into(),
            )
        };
        let inline = inline_allowed();
        let receiver = match access {
            Access::Gated => {
                // Queued (or run) while holding the gate, so after every
                // statement of a transaction that ended before and before
                // the `BEGIN` of any that starts after: the queue keeps that
                // order, and the gate need not be held while a queued call
                // runs.
                let _gate = self.shared.gate.lock().await;
                let f = move |conn: &mut Connection| {
                    discard_leaked_transaction(conn);
                    f(conn)
                };
                if inline {
                    return self.shared.worker.run_here(f).await;
                }
                self.shared.worker.submit(f)?
            }
            Access::InTransaction(active) => {
                if !active.load(Ordering::Acquire) {
                    return Err(ended());
                }
                let active = active.clone();
                let f = move |conn: &mut Connection| {
                    // Checked again with the connection: a transaction
                    // dropped after this call was queued has queued its
                    // rollback behind it, and the statement must not run in
                    // a transaction that is over.
                    if !active.load(Ordering::Acquire) {
                        return Err(ended());
                    }
                    f(conn)
                };
                if inline {
                    // The transaction holds the gate: nothing but its own
                    // calls (and a rollback, should it be dropped) is queued.
                    return self.shared.worker.run_here(f).await;
                }
                self.shared.worker.submit(f)?
            }
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

    /// Begins a transaction (`BEGIN IMMEDIATE`). Until it is committed,
    /// rolled back or dropped, other calls on this database wait.
    ///
    /// # Cancel safety
    ///
    /// Dropped while beginning, no transaction is left open.
    pub async fn transaction(&self) -> Result<SqliteTransaction> {
        let gate = self.shared.gate.clone().lock_owned().await;
        // Active from before its `BEGIN` is queued: dropped while that is in
        // flight, the transaction queues its `ROLLBACK` behind it.
        let tx = SqliteTransaction {
            db: self.clone(),
            active: Arc::new(AtomicBool::new(true)),
            _gate: gate,
        };
        let active = tx.active.clone();
        let begin = move |conn: &mut Connection| {
            discard_leaked_transaction(conn);
            let begun = conn.execute_batch("BEGIN IMMEDIATE").map_err(sqlite_error);
            if begun.is_err() {
                active.store(false, Ordering::Release);
            }
            begun
        };
        if inline_allowed() {
            self.shared.worker.run_here(begin).await?;
        } else {
            self.shared.worker.call(begin).await?;
        }
        Ok(tx)
    }
}

impl fmt::Debug for SqliteDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteDatabase")
            .field("path", &self.shared.path)
            .finish()
    }
}

/// An open SQLite transaction on a [`SqliteDatabase`].
///
/// Repositories from [`SqliteTransaction::repository`] write inside it.
/// Dropped without [`commit`](SqliteTransaction::commit), it rolls back.
#[must_use = "a transaction rolls back when dropped"]
pub struct SqliteTransaction {
    db: SqliteDatabase,
    active: Arc<AtomicBool>,
    _gate: OwnedMutexGuard<()>,
}

impl SqliteTransaction {
    /// How a repository made from this transaction reaches the connection.
    pub(super) fn access(&self) -> Access {
        Access::InTransaction(self.active.clone())
    }

    /// The database this transaction runs on.
    pub(super) fn database(&self) -> &SqliteDatabase {
        &self.db
    }

    /// Commits.
    ///
    /// # Cancel safety
    ///
    /// Dropped before the commit ran, the transaction rolls back.
    pub async fn commit(self) -> Result<()> {
        self.finish("COMMIT").await
    }

    /// Rolls back.
    ///
    /// # Cancel safety
    ///
    /// Dropped, the transaction still rolls back.
    pub async fn rollback(self) -> Result<()> {
        self.finish("ROLLBACK").await
    }

    async fn finish(self, sql: &'static str) -> Result<()> {
        let active = self.active.clone();
        let end = move |conn: &mut Connection| {
            // Checked with the connection: a call dropped before this ran
            // left the rollback to the transaction's drop, which queued it
            // and released the gate, so this statement must not touch
            // whatever transaction comes next.
            if !active.swap(false, Ordering::AcqRel) {
                return Ok(());
            }
            let done = conn.execute_batch(sql).map_err(sqlite_error);
            if done.is_err() && !conn.is_autocommit() {
                // A failed COMMIT (busy, full disk) leaves the transaction
                // open: end it here, not in a later call.
                let _ = conn.execute_batch("ROLLBACK");
            }
            done
        };
        if inline_allowed() {
            // Run to completion once begun (`block_in_place` is not
            // interrupted), while this transaction still holds the gate.
            return self.db.shared.worker.run_here(end).await;
        }
        self.db.shared.worker.call(end).await
    }
}

impl Drop for SqliteTransaction {
    fn drop(&mut self) {
        if self.active.swap(false, Ordering::AcqRel) {
            // Not committed: queue the rollback before the gate (a field) is
            // released, so it runs before any call that passes the gate next.
            let queued = self.db.shared.worker.queue(|conn| {
                if !conn.is_autocommit() {
                    if let Err(e) = conn.execute_batch("ROLLBACK") {
                        tracing::warn!(error = %e, "SQLite rollback of a dropped transaction failed");
                    }
                }
            });
            if let Err(e) = queued {
                tracing::warn!(error = %e, "SQLite rollback of a dropped transaction not queued");
            }
        }
    }
}

impl fmt::Debug for SqliteTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteTransaction")
            .field("db", &self.db)
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish()
    }
}

/// Rolls back a transaction left open outside a [`SqliteTransaction`] (a
/// closure given to [`SqliteDatabase::call`] that began one and did not end
/// it). Only run by calls queued while holding the gate, when no
/// [`SqliteTransaction`] is live, so an open transaction here is a leak.
fn discard_leaked_transaction(conn: &Connection) {
    if !conn.is_autocommit() {
        tracing::warn!("rolling back a SQLite transaction left open by a cancelled call");
        let _ = conn.execute_batch("ROLLBACK");
    }
}
