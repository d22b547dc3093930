//! [`SqliteTransaction`]: an open transaction on a [`SqliteDatabase`],
//! holding the database's gate from `BEGIN` to `COMMIT`/`ROLLBACK`.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusqlite::Connection;
use tokio::sync::OwnedMutexGuard;

use crate::ports::error::Result;

use super::database::{discard_leaked_transaction, Access, SqliteDatabase};
use super::error::sqlite_error;
use super::worker::inline_allowed;

impl SqliteDatabase {
    /// Begins a transaction (`BEGIN IMMEDIATE`). Until it is committed,
    /// rolled back or dropped, other calls on this database wait.
    ///
    /// # Cancel safety
    ///
    /// Dropped while beginning, no transaction is left open.
    pub async fn transaction(&self) -> Result<SqliteTransaction> {
        let gate = self.gate().lock_owned().await;
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
            self.worker().run_here(begin).await?;
        } else {
            self.worker().call(begin).await?;
        }
        Ok(tx)
    }
}

/// An open SQLite transaction on a [`SqliteDatabase`].
///
/// Repositories from [`SqliteTransaction::repository`] write inside it.
/// Dropped without [`commit`](SqliteTransaction::commit), it rolls back.
#[must_use = "a transaction rolls back when dropped"]
pub struct SqliteTransaction {
    pub(super) db: SqliteDatabase,
    pub(super) active: Arc<AtomicBool>,
    pub(super) _gate: OwnedMutexGuard<()>,
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
            return self.db.worker().run_here(end).await;
        }
        self.db.worker().call(end).await
    }
}

impl Drop for SqliteTransaction {
    fn drop(&mut self) {
        if self.active.swap(false, Ordering::AcqRel) {
            // Not committed: queue the rollback before the gate (a field) is
            // released, so it runs before any call that passes the gate next.
            let queued = self.db.worker().queue(|conn| {
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
