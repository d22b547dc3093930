//! Lock contracts: [`LockInfo`], [`LockGuard`], the [`DistributedLock`] and
//! [`LockRegistry`] traits, and [`migration_lock_key`].
//!
//! The traits describe the *shape* of a lock manager. They promise nothing
//! about cross-process exclusion or release on crash: those belong to the
//! PostgreSQL adapter alone. The conformance suite in
//! `pgcoord_testkit::locks` holds every implementation to the same
//! observable behaviour.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::error::{Error, LockLostError, Result};
pub use super::lock_mode::LockMode;
pub use super::loss::LossSignal;

/// A boxed, sendable future, as adapters hand them to [`LockGuard`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What is known about a lock this process holds.
///
/// The key and the holder label are shared (`Arc<str>`) with the manager's
/// own bookkeeping, so building an info, and cloning one, allocates
/// nothing; both read as `&str` (`&*info.key`, `info.key.as_ref()`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockInfo {
    /// The string key the caller asked for.
    pub key: Arc<str>,
    /// The advisory-lock id derived from the key (see [`lock_id_for_key`](crate::lock_id_for_key)).
    pub lock_id: i64,
    /// When the lock was granted, in UTC.
    pub acquired_at: DateTime<Utc>,
    /// The manager's holder label, if it has one.
    pub holder_id: Option<Arc<str>>,
    /// The fencing token of this acquisition, when the manager fences:
    /// strictly greater than the token of every earlier acquisition of the
    /// same key. Pass it to the protected resource, which refuses writes
    /// carrying an older one (see `docs/fencing.md`). Shared holds take
    /// none.
    pub fence: Option<u64>,
    /// Exclusive, or shared with other shared holders (see the
    /// `SharedLock` trait).
    pub mode: LockMode,
}

/// Builds the conventional key for a per-tenant operation: `"{operation}:{tenant_id}"`.
///
/// Pass `"migration"` for the default operation.
///
/// ```
/// use pgcoord::migration_lock_key;
/// use uuid::Uuid;
/// let tenant = Uuid::nil();
/// assert_eq!(
///     migration_lock_key(tenant, "cutover"),
///     "cutover:00000000-0000-0000-0000-000000000000"
/// );
/// ```
pub fn migration_lock_key(tenant_id: Uuid, operation: &str) -> String {
    format!("{operation}:{tenant_id}")
}

/// The default operation name for [`migration_lock_key`].
pub const DEFAULT_MIGRATION_OPERATION: &str = "migration";

/// The adapter half of a [`LockGuard`]: how to give the lock back.
///
/// Dropping the backend must release the lock promptly (in the background),
/// so that a guard dropped on any path — error, panic, cancelled task —
/// never leaks the lock.
pub trait GuardBackend: Send + Sync + 'static {
    /// Releases the lock and reports the outcome.
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>>;
    /// Hands the lock to the manager's registry, to be released later with
    /// `release(key)`.
    fn into_manual(self: Box<Self>);
    /// Turns an exclusive hold into a shared one with no moment in which
    /// the key is free, and returns the backend of the shared hold. On an
    /// error the lock is released (the backend is dropped). The default,
    /// for adapters without shared locks, refuses.
    fn downgrade(self: Box<Self>) -> BoxFuture<'static, Result<Box<dyn GuardBackend>>> {
        drop(self);
        Box::pin(std::future::ready(Err(Error::InvalidArgument(
            "this lock manager has no shared locks to downgrade to".into(),
        ))))
    }
}

/// A held lock. Dropping it releases the lock in the background.
///
/// Prefer [`LockGuard::release`] when the outcome matters: it waits for the
/// release to finish and reports errors (for example that the lock had been
/// lost). After a drop, the key may still be held for a moment on a
/// database manager (another manager's `try_lock` right then can find it
/// held), while [`InMemoryLockManager`](crate::InMemoryLockManager) frees it
/// at once: when the next step needs the key free, `release().await`.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    info: LockInfo,
    loss: LossSignal,
    backend: Option<Box<dyn GuardBackend>>,
}

impl LockGuard {
    /// Builds a guard. For adapters.
    pub fn new(info: LockInfo, loss: LossSignal, backend: Box<dyn GuardBackend>) -> Self {
        Self {
            info,
            loss,
            backend: Some(backend),
        }
    }

    /// What is known about the lock.
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// The key of the lock.
    pub fn key(&self) -> &str {
        &self.info.key
    }

    /// The advisory-lock id of the lock.
    pub fn lock_id(&self) -> i64 {
        self.info.lock_id
    }

    /// The fencing token of this acquisition (see [`LockInfo::fence`]).
    pub fn fence(&self) -> Option<u64> {
        self.info.fence
    }

    /// True once the lock has been lost.
    pub fn is_lost(&self) -> bool {
        self.loss.is_lost()
    }

    /// A cloneable handle on the lock-loss event, e.g. for a watcher task.
    pub fn loss_signal(&self) -> LossSignal {
        self.loss.clone()
    }

    /// Resolves when the lock is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is lost by dropping the future.
    pub async fn lost(&self) {
        self.loss.lost().await
    }

    /// Releases the lock and waits until the database confirmed it.
    ///
    /// Returns [`Error::LockLost`] when the lock had already been lost.
    ///
    /// # Cancel safety
    ///
    /// The guard is consumed when this is called. If the future is dropped
    /// before it completes, the release still happens in the background; only
    /// its outcome is lost.
    pub async fn release(mut self) -> Result<()> {
        let backend = self
            .backend
            .take()
            .expect("guard backend present until consumed");
        backend.release().await
    }

    /// How the lock is held (see [`LockInfo::mode`]).
    pub fn mode(&self) -> LockMode {
        self.info.mode
    }

    /// Turns an exclusive guard into a shared one **without a gap**: the
    /// shared hold is taken before the exclusive one is given up, so no
    /// writer can come in between, and shared requests can join at once
    /// (an exclusive request queued meanwhile waits for every shared
    /// holder). The guard keeps its fencing token and its loss signal. A
    /// shared guard is returned as it is.
    ///
    /// There is no upgrade: release the shared guard and acquire the key
    /// exclusively, and expect that another writer may get it in between.
    ///
    /// Fails with [`Error::LockLost`] if the lock had been lost; on any
    /// error the lock is released.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the guard is consumed when this is called, and a
    /// dropped future releases the lock (whether or not the downgrade had
    /// happened). Nothing leaks.
    pub async fn downgrade(mut self) -> Result<LockGuard> {
        if self.info.mode == LockMode::Shared {
            return Ok(self);
        }
        let backend = self
            .backend
            .take()
            .expect("guard backend present until consumed");
        let backend = backend.downgrade().await?;
        let mut info = self.info.clone();
        info.mode = LockMode::Shared;
        Ok(LockGuard::new(info, self.loss.clone(), backend))
    }

    /// Turns the guard into a manual lock, released later by the manager's
    /// `release(key)` (or `release_all`). Returns the lock's info.
    ///
    /// A [`LossSignal`] taken from the guard before keeps watching the
    /// lock: it fires if the lock is lost (its session ends), not when the
    /// lock is released by key or by `release_all`.
    pub fn into_manual(mut self) -> LockInfo {
        if let Some(backend) = self.backend.take() {
            backend.into_manual();
        }
        self.info.clone()
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("info", &self.info)
            .field("lost", &self.loss.is_lost())
            .finish()
    }
}

/// Acquire, release and check individual locks.
///
/// Implemented by `PostgresLockManager` (cross-process) and
/// `InMemoryLockManager` (one process, for tests).
pub trait DistributedLock: Send + Sync {
    /// Acquires `key`, waiting up to `timeout` (`None`: indefinitely;
    /// `Some(Duration::ZERO)`: exactly one attempt). A timeout too long
    /// for the clock to hold its deadline (`Some(Duration::MAX)`) also
    /// waits indefinitely.
    ///
    /// Fails with a [`LockAcquisitionError`](crate::ports::error::LockAcquisitionError)
    /// carrying the key, the reason and the timeout.
    ///
    /// # Cancel safety
    ///
    /// Implementations must leak nothing when the future is dropped at any
    /// point: no lock held, no session left waiting. A queued wait is not
    /// cancel safe in tokio's sense (dropped, it loses its place in the
    /// queue, as `tokio::sync::Semaphore::acquire` does); implementations
    /// say so.
    fn acquire(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<LockGuard>> + Send;

    /// Releases a manual lock (a guard turned into one with
    /// [`LockGuard::into_manual`]). A key this manager does not hold is a
    /// [`LockNotHeldError`](crate::ports::error::LockNotHeldError).
    ///
    /// # Cancel safety
    ///
    /// Once called, the release goes ahead even if the future is dropped.
    fn release<'a>(&'a self, key: &'a str) -> impl Future<Output = Result<()>> + Send + 'a;

    /// Whether this manager holds `key` now. Says nothing about other
    /// processes.
    fn is_held(&self, key: &str) -> bool;

    /// Whether every exclusive guard this manager grants carries a fencing
    /// token ([`LockGuard::fence`] is `Some`, larger than any earlier
    /// token of the key). Known without I/O. The default is `false`; a
    /// manager that fences says so, and code that needs tokens (an
    /// [`Election`](crate::coordination::Election)'s terms) checks it
    /// before it waits.
    fn fences(&self) -> bool {
        false
    }

    /// Like [`acquire`](DistributedLock::acquire) with a zero timeout, but
    /// "held elsewhere" is `Ok(None)` instead of an error.
    ///
    /// A try never queues behind a holder, but it may connect first: a
    /// database manager with no open session opens one, which takes up to
    /// its `connect_timeout` (10 s by default) against a server that does
    /// not answer.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (it never queues): a lock taken for a dropped call is
    /// released, so calling again finds the key as it was.
    fn try_lock(&self, key: &str) -> impl Future<Output = Result<Option<LockGuard>>> + Send {
        async move {
            match self.acquire(key, Some(Duration::ZERO)).await {
                Ok(guard) => Ok(Some(guard)),
                Err(e) if e.is_timeout() => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// Tries `keys` in order without waiting; returns the index and guard of
    /// the first one taken, or `Ok(None)` when every key is held elsewhere
    /// (or by this manager) or the list is empty.
    ///
    /// The contract, for implementations that override it (e.g. in one
    /// statement): on return, the caller holds exactly the returned key and
    /// no other key of the list (any other taken on the way is released
    /// first); the key returned is the first of the list that was free
    /// when it was tried, in list order; a key that is too long is an error
    /// (if the call gets that far), and then nothing is held. The default tries the keys one by one (one
    /// round trip each on a database); the semaphore's slots and the
    /// conformance suite in `pgcoord_testkit::coordination` rely on it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (it never queues): a lock taken for a dropped call is
    /// released, so calling again finds the keys as they were.
    fn try_lock_any(
        &self,
        keys: &[&str],
    ) -> impl Future<Output = Result<Option<(usize, LockGuard)>>> + Send {
        async move {
            for (i, key) in keys.iter().enumerate() {
                if let Some(guard) = self.try_lock(key).await? {
                    return Ok(Some((i, guard)));
                }
            }
            Ok(None)
        }
    }

    /// Runs `f` while holding `key`, then releases it.
    ///
    /// If the lock is lost while `f` runs, `f` is dropped (stopped at its
    /// next await point) and the call returns [`Error::LockLost`], whose
    /// reason is the loss signal's ([`LossSignal::reason`]; "the lock was
    /// lost" when the signal does not know why) followed by "while the
    /// work ran".
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops `f` and releases the lock.
    fn with_lock<F, Fut, T>(
        &self,
        key: &str,
        timeout: Option<Duration>,
        f: F,
    ) -> impl Future<Output = Result<T>> + Send
    where
        F: FnOnce(LockInfo) -> Fut + Send,
        Fut: Future<Output = T> + Send,
        T: Send,
    {
        async move {
            let guard = self.acquire(key, timeout).await?;
            let signal = guard.loss_signal();
            let work = f(guard.info().clone());
            tokio::select! {
                biased;
                _ = signal.lost() => Err(Error::LockLost(LockLostError {
                    key: guard.key().to_owned(),
                    reason: format!(
                        "{} while the work ran",
                        signal.reason().as_deref().unwrap_or("the lock was lost")
                    ),
                })),
                out = work => {
                    guard.release().await?;
                    Ok(out)
                }
            }
        }
    }
}

/// Bulk operations over every lock one manager holds.
pub trait LockRegistry: Send + Sync {
    /// Releases every lock this manager holds (guards included) and returns
    /// how many were released.
    ///
    /// # Cancel safety
    ///
    /// Releases already sent go ahead if the future is dropped; the count is lost.
    fn release_all(&self) -> impl Future<Output = Result<usize>> + Send;

    /// How many locks this manager holds now.
    fn held_lock_count(&self) -> usize;
}
