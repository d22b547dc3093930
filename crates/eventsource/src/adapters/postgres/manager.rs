//! [`PostgresLockManager`]: the public lock manager, on top of the adapter.
//!
//! It checks the key, runs the [`Acquirer`], wraps each outcome in the
//! port's types (guards, infos, errors carrying the key and the timeout)
//! and emits the `tracing` spans. Nothing below it knows about keys as
//! error context.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;

use super::acquirer::Acquirer;
use super::connect::Connector;
use super::session::{Granted, SessionContext};
use super::settings::Settings;
use crate::ports::error::{
    AcquireFailure, BackendErrorKind, Error, LockAcquisitionError, LockLostError, LockNotHeldError,
    Result,
};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{
    DistributedLock, GuardBackend, LockGuard, LockInfo, LockRegistry, LossSignal,
};

struct ManagerState {
    acquirer: Acquirer,
}

impl Drop for ManagerState {
    fn drop(&mut self) {
        // Manual locks belong to the manager: give them back. Guards still
        // alive keep their sessions until they are dropped.
        self.acquirer.ctx.registry.drop_manual_locks();
        self.acquirer.close();
    }
}

/// A lock manager on PostgreSQL session-level advisory locks.
///
/// One per process is the intended shape: it is cheap to clone (clones share
/// everything) and safe to use from many tasks.
///
/// # How it holds locks
///
/// - Uncontended locks live on a few long-lived **shared sessions**
///   (default 2; each lock id always maps to the same one). Concurrent
///   requests to one session are batched into one statement over an array
///   of lock ids, so throughput grows with load and 10,000 held locks need
///   two connections.
/// - A contended [`acquire`](DistributedLock::acquire) joins the key's
///   **wait line**: local tasks queue in arrival order, and one wait at a
///   time runs inside PostgreSQL (`pg_advisory_lock`) on a **dedicated
///   session** on behalf of the line, so one manager uses at most two
///   dedicated sessions per contended key (one holding, one waiting).
///   PostgreSQL serves processes in arrival order; a released lock passes
///   to the next waiter at once.
/// - After a wait that did not end in a grant, the session's state is
///   established (`pg_advisory_unlock_all()`), never assumed: PostgreSQL
///   can grant a lock and still report the wait's timeout or cancel.
/// - Locks are held outside transactions, so
///   `idle_in_transaction_session_timeout` never drops them.
/// - Two tasks of one manager never share a lock: the manager keeps local
///   owners of one key apart (advisory locks are re-entrant per session).
/// - Each guard can tell when its lock is lost ([`LockGuard::lost`]): the
///   session's connection ended, or its periodic liveness check failed.
/// - Every SQL function is called `pg_catalog.`-qualified, and a hot
///   standby is refused ([`AcquireFailure::Standby`]) unless allowed.
/// - Sessions show up in `pg_stat_activity` with `application_name =
///   'eventsource/<holder_id>'`.
///
/// ```no_run
/// # async fn run() -> eventsource::Result<()> {
/// use std::time::Duration;
/// use eventsource::DistributedLock;
/// use eventsource::adapters::postgres::PostgresLockManager;
///
/// let locks = PostgresLockManager::from_url("postgres://app@localhost/app")?;
/// let guard = locks.acquire("nightly-report", Some(Duration::from_secs(5))).await?;
/// // ... only one process in the fleet gets here at a time ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresLockManager {
    state: Arc<ManagerState>,
}

/// The port's error for a failed acquisition of `key`: the one place where
/// the key and the timeout are attached.
fn acquisition(key: &str, failure: AcquireFailure, timeout: Option<Duration>) -> Error {
    let failure = match failure {
        AcquireFailure::Backend(e) if e.kind() == BackendErrorKind::Standby => {
            AcquireFailure::Standby
        }
        other => other,
    };
    Error::LockAcquisition(LockAcquisitionError::new(key, failure, timeout))
}

impl PostgresLockManager {
    pub(crate) fn from_parts(connector: Arc<Connector>, settings: Settings) -> Self {
        let ctx = SessionContext::new(connector, settings);
        Self {
            state: Arc::new(ManagerState {
                acquirer: Acquirer::new(ctx),
            }),
        }
    }

    fn ctx(&self) -> &Arc<SessionContext> {
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

    /// The server process ids of this manager's open shared sessions (for
    /// diagnostics and fault tests).
    pub fn shared_session_pids(&self) -> Vec<i32> {
        self.state.acquirer.shared_session_pids()
    }

    fn info(&self, key: &str, lock_id: i64, g: &Granted) -> LockInfo {
        LockInfo {
            key: key.to_owned(),
            lock_id,
            acquired_at: g.acquired_at,
            holder_id: self.ctx().settings.holder_id.clone(),
        }
    }

    /// Every advisory lock in the database (or those of `keys`): who holds
    /// it, who waits for it and since when. Unlike [`is_held`](DistributedLock::is_held),
    /// this sees every process. Opens a short-lived session of its own.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a dropped call closes its session and
    /// leaves nothing behind.
    pub async fn holders(&self, keys: &[&str]) -> Result<Vec<super::AdvisoryLock>> {
        let connected = self
            .ctx()
            .connector
            .connect()
            .await
            .map_err(Error::Backend)?;
        super::holders::query_holders(&connected.client, keys).await
    }

    /// Checks once, on two short-lived sessions of its own, that the server
    /// really gives session-level advisory locks through this manager's
    /// connection settings (catches no-op advisory functions and
    /// transaction-mode poolers). A failure is a
    /// [`BackendErrorKind::NotPostgres`] error naming the cause, whose
    /// [`source`](std::error::Error::source) is a
    /// [`VerifyProblem`](super::VerifyProblem); the report lists the server
    /// settings that bound how long a vanished holder keeps its locks.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: its test locks live on its own two sessions, which close
    /// when the future is dropped, freeing them.
    pub async fn verify(&self) -> Result<super::VerifyReport> {
        super::verify::verify(&self.ctx().connector, &self.ctx().settings).await
    }

    /// Releases every lock and closes every session. Later acquisitions
    /// fail with `AcquireFailure::Closed`. Returns how many locks were released.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, and need not be: the manager is closed as soon as
    /// this is called, and the releases already sent go ahead if the future
    /// is dropped; only the count is lost.
    pub async fn close(&self) -> Result<usize> {
        let n = self.release_all().await?;
        self.state.acquirer.close();
        Ok(n)
    }
}

impl fmt::Debug for PostgresLockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLockManager")
            .field("holder_id", &self.ctx().settings.holder_id)
            .field("held", &self.ctx().registry.held())
            .field("sessions", &self.session_count())
            .finish()
    }
}

fn outcome_name(r: &Result<LockGuard>) -> &'static str {
    match r {
        Ok(_) => "acquired",
        Err(e) if e.is_timeout() => "timeout",
        Err(_) => "error",
    }
}

impl DistributedLock for PostgresLockManager {
    /// Acquires `key`: first a try-lock on a shared session; if another
    /// session holds the key, a fair wait in the key's wait line and inside
    /// PostgreSQL, bounded by `timeout` (which also bounds connecting).
    /// `Some(Duration::ZERO)` makes exactly one attempt.
    ///
    /// A server that does not answer in time is an
    /// [`AcquireFailure::Backend`] error of kind
    /// [`BackendErrorKind::Timeout`], never [`AcquireFailure::Timeout`]
    /// (which means the request was queued and not granted in time).
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped at any await point: no lock stays held and
    /// no session is left waiting (a server-side wait nobody wants is
    /// cancelled, and a grant that raced the drop is released within about a
    /// round trip). Not cancel safe in tokio's sense: a dropped wait loses
    /// its place in the queue, as `tokio::sync::Semaphore::acquire` does.
    fn acquire(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<LockGuard>> + Send {
        let span = tracing::debug_span!(
            "eventsource.lock.acquire",
            key,
            lock_id = tracing::field::Empty,
            outcome = tracing::field::Empty,
            wait_us = tracing::field::Empty
        );
        async move {
            let started = Instant::now();
            let lock_id = checked_lock_id(key, timeout)?;
            tracing::Span::current().record("lock_id", lock_id);
            let key_arc: Arc<str> = Arc::from(key);
            let result = match self
                .state
                .acquirer
                .acquire(lock_id, &key_arc, timeout)
                .await
            {
                Ok(g) => {
                    let info = self.info(key, lock_id, &g);
                    Ok(LockGuard::new(
                        info,
                        LossSignal::from_token(g.loss),
                        Box::new(g.lock),
                    ))
                }
                Err(failure) => Err(acquisition(key, failure, timeout)),
            };
            let span = tracing::Span::current();
            span.record("outcome", outcome_name(&result));
            span.record("wait_us", started.elapsed().as_micros() as u64);
            tracing::debug!(outcome = outcome_name(&result), "acquire finished");
            result
        }
        .instrument(span)
    }

    /// One try-lock, never waiting. `Ok(None)` when another session holds
    /// the key, or another task of this manager holds or is taking it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a lock taken for a dropped call is released at once, so
    /// calling again finds the key as it would have.
    fn try_acquire(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<LockInfo>>> + Send {
        let span = tracing::debug_span!(
            "eventsource.lock.try_acquire",
            key,
            lock_id = tracing::field::Empty,
            outcome = tracing::field::Empty
        );
        async move {
            let zero = Some(Duration::ZERO);
            let lock_id = checked_lock_id(key, zero)?;
            tracing::Span::current().record("lock_id", lock_id);
            let key_arc: Arc<str> = Arc::from(key);
            let r = match self.state.acquirer.try_once(lock_id, &key_arc).await {
                Ok(Some(g)) => {
                    let info = self.info(key, lock_id, &g);
                    match self.ctx().registry.keep_manual(g.lock) {
                        Ok(()) => Ok(Some(info)),
                        Err(lock) => {
                            drop(lock);
                            Err(Error::LockLost(LockLostError {
                                key: key.to_owned(),
                                reason: "its session ended as it was granted".into(),
                            }))
                        }
                    }
                }
                Ok(None) => Ok(None),
                Err(failure) => Err(acquisition(key, failure, zero)),
            };
            let outcome = match &r {
                Ok(Some(_)) => "acquired",
                Ok(None) => "held_elsewhere",
                Err(_) => "error",
            };
            tracing::Span::current().record("outcome", outcome);
            tracing::debug!(outcome, "try_acquire finished");
            r
        }
        .instrument(span)
    }

    /// Releases a manual lock and waits for the server's confirmation.
    ///
    /// # Cancel safety
    ///
    /// Once called, the release goes ahead even if the future is dropped;
    /// only its outcome is lost (calling again reports the key not held).
    fn release(&self, key: &str) -> impl std::future::Future<Output = Result<()>> + Send {
        let lock_id = crate::lock_id_for_key(key);
        let span = tracing::debug_span!(
            "eventsource.lock.release",
            key,
            lock_id,
            outcome = tracing::field::Empty
        );
        let held = self.ctx().registry.take_manual(lock_id, key);
        async move {
            let r = match held {
                Some(lock) => Box::new(lock).release().await,
                None => Err(Error::LockNotHeld(LockNotHeldError {
                    key: key.to_owned(),
                })),
            };
            let outcome = if r.is_ok() { "released" } else { "error" };
            tracing::Span::current().record("outcome", outcome);
            tracing::debug!(outcome, "release finished");
            r
        }
        .instrument(span)
    }

    fn is_held(&self, key: &str) -> bool {
        self.ctx().registry.is_held(crate::lock_id_for_key(key))
    }
}

impl LockRegistry for PostgresLockManager {
    /// Releases every lock this manager holds; guards still alive see their
    /// lock as lost.
    ///
    /// # Cancel safety
    ///
    /// The unlocks are sent before the first await; dropping the future
    /// loses only the count.
    fn release_all(&self) -> impl std::future::Future<Output = Result<usize>> + Send {
        let items = self.ctx().registry.take_all_held();
        let count = items.len();
        let mut waits = Vec::with_capacity(count);
        for item in items {
            match item.manual {
                Some(lock) => waits.push(Box::new(lock).release()),
                None => {
                    let (tx, rx) = oneshot::channel();
                    if !item.session.send_unlock(item.lock_id, item.token, Some(tx)) {
                        self.ctx().registry.finish(item.lock_id, item.token);
                    }
                    waits.push(Box::pin(async move {
                        let _ = rx.await;
                        Ok(())
                    }));
                }
            }
        }
        async move {
            for w in waits {
                // A lock whose session already ended is released all the same.
                let _ = w.await;
            }
            tracing::debug!(count, "release_all finished");
            Ok(count)
        }
    }

    fn held_lock_count(&self) -> usize {
        self.ctx().registry.held()
    }
}
