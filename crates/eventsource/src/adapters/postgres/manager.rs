//! [`PostgresLockManager`]: cross-process locks on PostgreSQL advisory locks.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::config::{PostgresLockManagerBuilder, Settings};
use super::connect::Connector;
use super::pool::WaitPool;
use super::registry::{Registry, ReserveError};
use super::session::{self, Granted, Kind, Op, SessionHandle};
use crate::ports::error::{
    AcquireFailure, BackendError, BackendErrorKind, Error, LockAcquisitionError, LockLostError,
    LockNotHeldError, Result,
};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{
    DistributedLock, GuardBackend, LockGuard, LockInfo, LockRegistry, LossSignal,
};

/// State shared by the manager and its session actors.
pub(crate) struct Core {
    pub(crate) connector: Arc<Connector>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) settings: Settings,
    /// Cancelled when the manager is closed or dropped.
    pub(crate) closed: CancellationToken,
    sessions_open: AtomicUsize,
}

impl Core {
    pub(crate) fn session_opened(&self) {
        self.sessions_open.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn session_closed(&self) {
        self.sessions_open.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Inner {
    core: Arc<Core>,
    shared: Vec<Mutex<Option<SessionHandle>>>,
    pool: Arc<WaitPool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Manual locks belong to the manager: give them back. Guards still
        // alive keep their sessions until they are dropped.
        self.core.registry.drop_manual_locks();
        self.core.closed.cancel();
        self.pool.clear();
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
/// - A contended [`acquire`](DistributedLock::acquire) waits inside
///   PostgreSQL (`pg_advisory_lock`, bounded by a `lock_timeout` set for
///   that wait only) on a **dedicated session** that holds nothing else:
///   waiters are served in arrival order and a released lock passes to the
///   next waiter at once. The lock then stays on that session until released.
/// - Locks are held outside transactions, so
///   `idle_in_transaction_session_timeout` never drops them.
/// - Two tasks of one manager never share a lock: the manager keeps local
///   owners of one key apart (advisory locks are re-entrant per session).
/// - Each guard can tell when its lock is lost ([`LockGuard::lost`]): the
///   session's connection ended, or its periodic liveness check failed.
/// - At most [`max_held_locks`](PostgresLockManagerBuilder::max_held_locks)
///   locks are held at once, to keep the server's shared lock table from
///   filling up.
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
    inner: Arc<Inner>,
}

fn acquisition(key: &str, reason: AcquireFailure, timeout: Option<Duration>) -> Error {
    Error::LockAcquisition(LockAcquisitionError::new(key, reason, timeout))
}

fn closed_error() -> BackendError {
    BackendError::new(BackendErrorKind::Closed, "the lock session ended")
}

/// How much later than the caller's deadline the client gives up on a wait
/// the server should have timed out itself (it normally does first, and the
/// session stays reusable).
const SERVER_TIMEOUT_GRACE: Duration = Duration::from_millis(200);

impl PostgresLockManager {
    /// Starts building a manager over `config`.
    pub fn builder(config: tokio_postgres::Config) -> PostgresLockManagerBuilder {
        PostgresLockManagerBuilder::new(config)
    }

    /// A manager with default settings for a `postgres://` URL or a
    /// `key=value` connection string, which may carry libpq's `sslmode`
    /// (up to `verify-full`) and `sslrootcert`. Performs no I/O.
    pub fn from_url(url: &str) -> Result<Self> {
        Ok(PostgresLockManagerBuilder::from_url(url)?.build())
    }

    /// A builder for a `postgres://` URL or a `key=value` connection
    /// string (with libpq's `sslmode` and `sslrootcert`); see
    /// [`PostgresLockManagerBuilder::from_url`].
    pub fn builder_from_url(url: &str) -> Result<PostgresLockManagerBuilder> {
        PostgresLockManagerBuilder::from_url(url)
    }

    pub(crate) fn from_parts(connector: Arc<Connector>, settings: Settings) -> Self {
        let registry = Registry::new(settings.max_held_locks);
        let shared = (0..settings.shared_sessions)
            .map(|_| Mutex::new(None))
            .collect();
        let pool = WaitPool::new(settings.max_wait_sessions, settings.max_idle_wait_sessions);
        let core = Arc::new(Core {
            connector,
            registry,
            settings,
            closed: CancellationToken::new(),
            sessions_open: AtomicUsize::new(0),
        });
        Self {
            inner: Arc::new(Inner { core, shared, pool }),
        }
    }

    fn core(&self) -> &Arc<Core> {
        &self.inner.core
    }

    /// The holder label given at build time.
    pub fn holder_id(&self) -> Option<&str> {
        self.core().settings.holder_id.as_deref()
    }

    /// How many database sessions this manager has open now.
    pub fn session_count(&self) -> usize {
        self.core().sessions_open.load(Ordering::Relaxed)
    }

    /// The server process ids of this manager's open shared sessions (for
    /// diagnostics and fault tests).
    pub fn shared_session_pids(&self) -> Vec<i32> {
        self.inner
            .shared
            .iter()
            .filter_map(|slot| {
                let slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                slot.as_ref().filter(|h| !h.is_dead()).map(|h| h.pid())
            })
            .filter(|pid| *pid != 0)
            .collect()
    }

    fn shared_session(&self, lock_id: i64) -> SessionHandle {
        let n = self.inner.shared.len() as u64;
        let slot = &self.inner.shared[(lock_id as u64 % n) as usize];
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some(h) if !h.is_dead() => h.clone(),
            _ => {
                let h = session::spawn(self.core().clone(), Kind::Shared, std::sync::Weak::new());
                *slot = Some(h.clone());
                h
            }
        }
    }

    fn dedicated_session(&self) -> SessionHandle {
        self.inner.pool.take().unwrap_or_else(|| {
            session::spawn(
                self.core().clone(),
                Kind::Dedicated,
                Arc::downgrade(&self.inner.pool),
            )
        })
    }

    /// One try-lock on the lock id's shared session.
    async fn try_shared(
        &self,
        lock_id: i64,
        key: &Arc<str>,
    ) -> std::result::Result<std::result::Result<Option<Granted>, BackendError>, ReserveError> {
        let mut res = self.core().registry.reserve(lock_id, key)?;
        // A session that died between our look and our send is replaced
        // once. One that could not even open says why.
        let mut failure = None;
        for _ in 0..2 {
            let (tx, rx) = oneshot::channel();
            let op = Op::TryLock {
                res,
                key: key.clone(),
                reply: tx,
            };
            let session = self.shared_session(lock_id);
            match session.send_or_return(op) {
                Ok(()) => return Ok(rx.await.unwrap_or_else(|_| Err(closed_error()))),
                Err(Op::TryLock { res: r, .. }) => {
                    res = r;
                    failure = session.open_error();
                }
                Err(_) => unreachable!("send_or_return gives back the op it was given"),
            }
        }
        Ok(Err(failure.unwrap_or_else(closed_error)))
    }

    /// A blocking wait on a dedicated session.
    async fn wait_dedicated(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
    ) -> Result<Option<Granted>> {
        let sem = self.inner.pool.permits.clone();
        let permit = match deadline {
            None => sem.acquire_owned().await,
            Some(d) => match tokio::time::timeout_at(d, sem.acquire_owned()).await {
                Ok(p) => p,
                Err(_) => return Ok(None),
            },
        }
        .map_err(|_| acquisition(key, AcquireFailure::Closed, timeout))?;
        let mut permit = Some(permit);
        let mut failure = None;
        for _ in 0..2 {
            let lock_timeout = deadline.map(|d| {
                d.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            });
            let (tx, rx) = oneshot::channel();
            let op = Op::Wait {
                lock_id,
                key: key.clone(),
                lock_timeout,
                permit: permit.take().expect("permit present"),
                reply: tx,
            };
            let session = self.dedicated_session();
            match session.send_or_return(op) {
                Ok(()) => {
                    return match rx.await {
                        Ok(Ok(g)) => Ok(g),
                        Ok(Err(e)) => Err(acquisition(key, AcquireFailure::Backend(e), timeout)),
                        Err(_) => Err(acquisition(
                            key,
                            AcquireFailure::Backend(closed_error()),
                            timeout,
                        )),
                    }
                }
                Err(Op::Wait { permit: p, .. }) => {
                    permit = Some(p);
                    failure = session.open_error();
                }
                Err(_) => unreachable!("send_or_return gives back the op it was given"),
            }
        }
        Err(acquisition(
            key,
            AcquireFailure::Backend(failure.unwrap_or_else(closed_error)),
            timeout,
        ))
    }

    async fn acquire_granted(
        &self,
        key: &str,
        lock_id: i64,
        key_arc: &Arc<str>,
        timeout: Option<Duration>,
    ) -> Result<Granted> {
        if self.core().closed.is_cancelled() {
            return Err(acquisition(key, AcquireFailure::Closed, timeout));
        }
        let one_attempt = timeout == Some(Duration::ZERO);
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let timed_out = || acquisition(key, AcquireFailure::Timeout, timeout);

        // 1. Fast path: a try-lock on the shared session.
        let attempt = self.try_shared(lock_id, key_arc);
        let first = match deadline {
            Some(d) if !one_attempt => match tokio::time::timeout_at(d, attempt).await {
                Ok(r) => r,
                Err(_) => return Err(timed_out()),
            },
            _ => attempt.await,
        };
        match first {
            Ok(Ok(Some(g))) => return Ok(g),
            Ok(Ok(None)) | Err(ReserveError::Busy) => {}
            Ok(Err(e)) => return Err(acquisition(key, AcquireFailure::Backend(e), timeout)),
            Err(ReserveError::Budget(limit)) => {
                return Err(acquisition(
                    key,
                    AcquireFailure::BudgetExceeded { limit },
                    timeout,
                ))
            }
        }
        if one_attempt {
            return Err(timed_out());
        }

        // 2. Contended: queue inside PostgreSQL on a dedicated session.
        // A queued wait counts against the budget like a held lock: it takes
        // a place in the server's lock table, and becomes a held lock.
        let _slot = match self.core().registry.reserve_wait() {
            Ok(slot) => slot,
            Err(_) => {
                let limit = self.core().registry.budget();
                return Err(acquisition(
                    key,
                    AcquireFailure::BudgetExceeded { limit },
                    timeout,
                ));
            }
        };
        let wait = self.wait_dedicated(lock_id, key_arc, deadline, timeout);
        let granted = match deadline {
            None => wait.await?,
            Some(d) => match tokio::time::timeout_at(d + SERVER_TIMEOUT_GRACE, wait).await {
                Ok(r) => r?,
                Err(_) => None,
            },
        };
        granted.ok_or_else(timed_out)
    }

    fn info(&self, key: &str, lock_id: i64, g: &Granted) -> LockInfo {
        LockInfo {
            key: key.to_owned(),
            lock_id,
            acquired_at: g.acquired_at,
            holder_id: self.core().settings.holder_id.clone(),
        }
    }

    /// Every advisory lock in the database (or those of `keys`): who holds
    /// it, who waits for it and since when. Unlike [`is_held`](DistributedLock::is_held),
    /// this sees every process. Opens a short-lived session of its own.
    pub async fn holders(&self, keys: &[&str]) -> Result<Vec<super::AdvisoryLock>> {
        let connected = self
            .core()
            .connector
            .connect()
            .await
            .map_err(Error::Backend)?;
        super::holders::query_holders(&connected.client, keys).await
    }

    /// Checks once that the server really gives session-level advisory
    /// locks through this manager's connection settings: that two sessions
    /// conflict on a test key (catches engines whose advisory functions are
    /// no-ops, such as CockroachDB) and that a connection keeps its server
    /// session across statements (catches transaction-mode poolers such as
    /// PgBouncer with `pool_mode = transaction`, behind which session locks
    /// are silently unsafe). Opens two short-lived sessions of its own.
    ///
    /// A server that fails is reported as a
    /// [`BackendErrorKind::NotPostgres`] error with a message naming the
    /// cause; its [`source`](std::error::Error::source) is a
    /// [`VerifyProblem`](super::VerifyProblem). The report lists the server
    /// settings that bound how long a vanished holder keeps its locks, with
    /// advice.
    pub async fn verify(&self) -> Result<super::VerifyReport> {
        super::verify::verify(&self.core().connector, &self.core().settings).await
    }

    /// Releases every lock and closes every session. Later acquisitions
    /// fail with `AcquireFailure::Closed`. Returns how many locks were released.
    ///
    /// # Cancel safety
    ///
    /// The manager is closed as soon as this is called; releases already
    /// sent go ahead if the future is dropped.
    pub async fn close(&self) -> Result<usize> {
        let n = self.release_all().await?;
        self.core().closed.cancel();
        self.inner.pool.clear();
        Ok(n)
    }
}

impl fmt::Debug for PostgresLockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLockManager")
            .field("holder_id", &self.core().settings.holder_id)
            .field("held", &self.core().registry.held())
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
    /// session holds the key, a fair wait inside PostgreSQL on a dedicated
    /// session, bounded by `timeout` (which also bounds waiting for a
    /// connection). `Some(Duration::ZERO)` makes exactly one attempt.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropped before the server answered: the request is
    /// skipped, or the lock it took is released as soon as it is granted.
    /// Dropped during a wait: the wait is cancelled on the server and the
    /// session returns to the pool (or is closed if its state is unknown).
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
            let result = self
                .acquire_granted(key, lock_id, &key_arc, timeout)
                .await
                .map(|g| {
                    let info = self.info(key, lock_id, &g);
                    LockGuard::new(info, LossSignal::from_token(g.loss), Box::new(g.lock))
                });
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
    /// Cancel safe: a lock taken for a dropped call is released at once.
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
            let lock_id = checked_lock_id(key, Some(Duration::ZERO))?;
            tracing::Span::current().record("lock_id", lock_id);
            if self.core().closed.is_cancelled() {
                return Err(acquisition(
                    key,
                    AcquireFailure::Closed,
                    Some(Duration::ZERO),
                ));
            }
            let key_arc: Arc<str> = Arc::from(key);
            let r = match self.try_shared(lock_id, &key_arc).await {
                Ok(Ok(Some(g))) => {
                    let info = self.info(key, lock_id, &g);
                    match self.core().registry.put_manual(g.lock) {
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
                Ok(Ok(None)) | Err(ReserveError::Busy) => Ok(None),
                Ok(Err(e)) => Err(acquisition(
                    key,
                    AcquireFailure::Backend(e),
                    Some(Duration::ZERO),
                )),
                Err(ReserveError::Budget(limit)) => Err(acquisition(
                    key,
                    AcquireFailure::BudgetExceeded { limit },
                    Some(Duration::ZERO),
                )),
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
    /// Once called, the release goes ahead even if the future is dropped.
    fn release(&self, key: &str) -> impl std::future::Future<Output = Result<()>> + Send {
        let lock_id = crate::lock_id_for_key(key);
        let span = tracing::debug_span!(
            "eventsource.lock.release",
            key,
            lock_id,
            outcome = tracing::field::Empty
        );
        let held = self.core().registry.take_manual(lock_id, key);
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
        self.core().registry.is_held(crate::lock_id_for_key(key))
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
        let victims = self.core().registry.take_all_held();
        let count = victims.len();
        let mut waits = Vec::with_capacity(count);
        for v in victims {
            match v.manual {
                Some(lock) => waits.push(Box::new(lock).release()),
                None => {
                    let (tx, rx) = oneshot::channel();
                    let sent = v.session.send(Op::Unlock {
                        lock_id: v.lock_id,
                        token: v.token,
                        reply: Some(tx),
                    });
                    if !sent {
                        self.core().registry.finish(v.lock_id, v.token);
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
        self.core().registry.held()
    }
}
