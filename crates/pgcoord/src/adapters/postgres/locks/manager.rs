//! [`PostgresLockManager`]: the public lock manager, on top of the adapter:
//! construction, inspection (`holders`, `verify`) and `close`. Its
//! implementation of the lock ports is in `lock_ports.rs`.

use std::fmt;
use std::sync::Arc;

use super::acquirer::Acquirer;
use super::inspection::InspectionSession;
use super::session::{Granted, SessionContext};
use super::settings::Settings;
use crate::adapters::postgres::connection::connect::Connector;
use crate::ports::error::{Error, Result};
use crate::ports::locks::{LockInfo, LockRegistry};

pub(super) struct ManagerState {
    pub(super) acquirer: Acquirer,
    inspection: InspectionSession,
}

impl Drop for ManagerState {
    fn drop(&mut self) {
        // Manual locks belong to the manager: give them back. Guards still
        // alive keep their sessions until they are dropped.
        self.acquirer.ctx.holdings.drop_manual_locks();
        self.acquirer.close();
        self.inspection.close();
    }
}

/// A lock manager on PostgreSQL session-level advisory locks.
///
/// One per process is the intended shape: it is cheap to clone (clones share
/// everything) and safe to use from many tasks.
///
/// # How it holds locks
///
/// - Uncontended locks live on a few long-lived **batched sessions**
///   (default 2; each lock id always maps to the same one). Concurrent
///   requests to one session are batched into one statement over an array
///   of lock ids, so throughput grows with load and 10,000 held locks need
///   two connections.
/// - A contended [`acquire`](crate::DistributedLock::acquire) joins the key's
///   **wait line**: local tasks queue in arrival order, and one wait at a
///   time runs inside PostgreSQL (`pg_advisory_lock`) on a **dedicated
///   session** on behalf of the line, so one manager uses one dedicated
///   session per contended key (it waits, holds the grant, then waits for
///   the next task). PostgreSQL serves processes in arrival order; a
///   released lock passes to the next waiter at once.
/// - After a wait that did not end in a grant, the session's state is
///   established (`pg_advisory_unlock_all()`), never assumed: PostgreSQL
///   can grant a lock and still report the wait's timeout or cancel.
/// - Locks are held outside transactions, so
///   `idle_in_transaction_session_timeout` never drops them.
/// - Two tasks of one manager never share a lock: the manager keeps local
///   owners of one key apart (advisory locks are re-entrant per session).
/// - Each guard can tell when its lock is lost ([`LockGuard::lost`](crate::LockGuard::lost)): the
///   session's connection ended, or its periodic liveness check failed.
/// - Every SQL function is called `pg_catalog.`-qualified, and a hot
///   standby is refused (a [`BackendErrorKind::Standby`](crate::ports::error::BackendErrorKind::Standby) failure) unless allowed.
/// - Sessions show up in `pg_stat_activity` with `application_name =
///   'eventsource/<holder_id>'`.
///
/// ```no_run
/// # async fn run() -> pgcoord::Result<()> {
/// use std::time::Duration;
/// use pgcoord::DistributedLock;
/// use pgcoord::PostgresLockManager;
///
/// let locks = PostgresLockManager::builder("postgres://app@localhost/app".parse()?).build()?;
/// let guard = locks.acquire("nightly-report", Some(Duration::from_secs(5))).await?;
/// // ... only one process in the fleet gets here at a time ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresLockManager {
    pub(super) state: Arc<ManagerState>,
}

impl PostgresLockManager {
    pub(crate) fn from_parts(connector: Arc<Connector>, settings: Settings) -> Self {
        super::metrics::describe();
        let ctx = SessionContext::new(connector, settings);
        Self {
            state: Arc::new(ManagerState {
                acquirer: Acquirer::new(ctx),
                inspection: InspectionSession::default(),
            }),
        }
    }

    pub(super) fn ctx(&self) -> &Arc<SessionContext> {
        &self.state.acquirer.ctx
    }

    /// The holder label given at build time.
    pub fn holder_id(&self) -> Option<&str> {
        self.ctx().settings.holder_id.as_deref()
    }

    /// How many database sessions this manager has open now.
    pub fn session_count(&self) -> usize {
        self.ctx().open_sessions()
    }

    /// How many tasks of this manager wait for a contended key now: in the
    /// keys' wait lines (at most one wait per key runs in PostgreSQL), and
    /// for shared holds (each waits in PostgreSQL on its own session).
    pub fn waiting_tasks(&self) -> usize {
        self.state.acquirer.waiting()
    }

    /// The server process ids of this manager's open batched sessions (for
    /// diagnostics and fault tests).
    pub fn batched_session_pids(&self) -> Vec<i32> {
        self.state.acquirer.batched_session_pids()
    }

    /// The info of a grant; its key is the one the grant's lock carries
    /// (shared, not copied).
    pub(super) fn info(&self, lock_id: i64, g: &Granted) -> LockInfo {
        LockInfo {
            key: g.lock.key().clone(),
            lock_id,
            acquired_at: g.acquired_at,
            holder_id: self.ctx().settings.holder_id.clone(),
            fence: g.fence,
            mode: g.mode,
        }
    }

    /// Creates the fencing table and its SQL check functions in this
    /// database if they are missing (see [`fencing::install`](super::fencing::install)),
    /// on a short-lived session of its own. Run once per database before
    /// the first acquisition of a manager built with
    /// [`fencing(true)`](crate::adapters::postgres::PostgresLockManagerBuilder::fencing);
    /// idempotent. Says where the objects are, which role owns them, and
    /// whether they were left as they were (up to date, and owned by a
    /// role this one may not act as): see [`fencing::install`](super::fencing::install).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the install is one transaction; a dropped call commits
    /// nothing, and its session closes.
    pub async fn install_fencing(&self) -> Result<super::fencing::Installed> {
        let mut connected = self
            .ctx()
            .connector
            .connect()
            .await
            .map_err(Error::Backend)?;
        super::fencing::install(&mut connected.client).await
    }

    /// Every advisory lock in the database (or those of `keys`): who holds
    /// it, who waits for it and since when. Unlike [`is_held`](crate::DistributedLock::is_held),
    /// this sees every process. One statement (two for a fencing manager,
    /// which also shows each lock's current token).
    ///
    /// It runs on the manager's **inspection session**, opened at the first
    /// call and kept for the next ones (and for [`Election::leader`](crate::coordination::Election::leader)
    /// and every look of [`Election::watch`](crate::coordination::Election::watch),
    /// which call this), so a look costs a round trip, not a connect, TLS
    /// handshake and authentication. It is one more connection per manager
    /// at most, whatever the number of concurrent looks (they share it),
    /// not counted in [`session_count`](Self::session_count) nor in the
    /// `max_wait_sessions` bound, and it takes no lock; it is opened again
    /// when it has ended (a look that fails because it just ended is tried
    /// once more on a new one), and closed by [`close`](Self::close) or when
    /// the last clone of the manager is dropped. In
    /// [`single_session`](crate::adapters::postgres::PostgresLockManagerBuilder::single_session)
    /// mode it runs on the manager's one session instead.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a call dropped while the session is
    /// being opened leaves no connection behind.
    pub async fn holders(
        &self,
        keys: &[&str],
    ) -> Result<Vec<crate::adapters::postgres::AdvisoryLock>> {
        if let Some(r) = self.state.acquirer.holders_on_shared(keys).await {
            return r; // single-session mode: on the manager's own session
        }
        let connector = &self.ctx().connector;
        let session = self.state.inspection.get(connector).await?;
        match self.holders_on(&session.client, keys).await {
            Err(Error::Backend(e))
                if e.kind() == crate::ports::error::BackendErrorKind::Closed
                    || session.client.is_closed() =>
            {
                // The kept session had ended unnoticed: once more, on a new one.
                let failed = Some(&session);
                let session = self.state.inspection.get_unless(connector, failed).await?;
                self.holders_on(&session.client, keys).await
            }
            r => r,
        }
    }

    async fn holders_on(
        &self,
        client: &tokio_postgres::Client,
        keys: &[&str],
    ) -> Result<Vec<crate::adapters::postgres::AdvisoryLock>> {
        if self.ctx().settings.fencing {
            // A fencing manager shows each lock's current token.
            let query = crate::adapters::postgres::HoldersQuery::keys(keys)
                .with_fences(client)
                .await?;
            return query.run(client).await;
        }
        super::holders::query_holders(client, keys).await
    }

    /// Checks once, on two short-lived sessions of its own, that the server
    /// really gives session-level advisory locks through this manager's
    /// connection settings (catches no-op advisory functions and
    /// transaction-mode poolers). A failure is a
    /// [`BackendErrorKind::NotPostgres`](crate::ports::error::BackendErrorKind::NotPostgres) error naming the cause, whose
    /// [`source`](std::error::Error::source) is a
    /// [`VerifyProblem`](crate::adapters::postgres::VerifyProblem); the report lists the server
    /// settings that bound how long a vanished holder keeps its locks.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: its test locks live on its own two sessions, which close
    /// when the future is dropped, freeing them.
    pub async fn verify(&self) -> Result<crate::adapters::postgres::VerifyReport> {
        super::verify::verify(&self.ctx().connector, &self.ctx().settings).await
    }

    /// Releases every lock and closes every session. Later acquisitions
    /// fail with `AcquireFailure::ManagerClosed`. Returns how many locks were released.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, and need not be: the manager is closed as soon as
    /// this is called, and the releases already sent go ahead if the future
    /// is dropped; only the count is lost.
    pub async fn close(&self) -> Result<usize> {
        // Closed first: a task woken by the loss of a lock taken below (an
        // election campaigning again) must find the manager closed, and a
        // grant still on its way is given back. The sessions end once their
        // locks are released.
        self.state.acquirer.close();
        self.state.inspection.close();
        self.release_all().await
    }
}

impl fmt::Debug for PostgresLockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLockManager")
            .field("holder_id", &self.ctx().settings.holder_id)
            .field("held", &crate::LockRegistry::held_lock_count(self))
            .field("sessions", &self.session_count())
            .finish()
    }
}
