//! Reader-writer locks: [`LockMode`] and the [`SharedLock`] trait.
//!
//! A key can be held by one exclusive holder, or by any number of shared
//! holders at once. Waiting is first come, first served across both modes:
//! a shared request never passes an exclusive one queued before it, so a
//! stream of readers cannot starve a writer. An exclusive guard can be
//! turned into a shared one without a moment in which the key is free
//! ([`LockGuard::downgrade`]); there is no upgrade (release the shared
//! guard and acquire exclusively, knowing that another writer may come in
//! between).

use std::future::Future;
use std::time::Duration;

use super::error::Result;
pub use super::lock_mode::LockMode;
use super::locks::{DistributedLock, LockGuard};

/// Shared (read) holds of a key, beside the exclusive ones of
/// [`DistributedLock`]; the two modes exclude each other on the same key.
///
/// Implemented by `PostgresLockManager` (`pg_advisory_lock_shared`, the
/// same advisory id as the exclusive lock, so other languages can take part)
/// and `InMemoryLockManager`. Shared holds carry no fencing token (fencing
/// protects writes; [`LockInfo::fence`](super::locks::LockInfo::fence) is
/// `None`), except a downgraded guard, which keeps its token.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use pgcoord::{DistributedLock, InMemoryLockManager, LockMode, SharedLock};
///
/// let locks = InMemoryLockManager::new(None);
/// let wait = Some(Duration::from_secs(5));
/// let a = locks.acquire_shared("catalogue", wait).await?;
/// let b = locks.acquire_shared("catalogue", wait).await?; // readers share
/// assert!(locks.try_lock("catalogue").await?.is_none()); // no writer meanwhile
/// a.release().await?;
/// b.release().await?;
///
/// let w = locks.acquire("catalogue", wait).await?; // write...
/// let r = w.downgrade().await?; // ...then read on, with no gap for another writer
/// assert_eq!(r.mode(), LockMode::Shared);
/// assert!(locks.try_lock_shared("catalogue").await?.is_some()); // readers join
/// r.release().await?;
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
pub trait SharedLock: DistributedLock {
    /// Acquires `key` in shared mode, waiting up to `timeout` (`None`:
    /// indefinitely; `Some(Duration::ZERO)`: exactly one attempt). The wait
    /// queues behind every request made before it, exclusive or shared.
    ///
    /// # Cancel safety
    ///
    /// Implementations must leak nothing when the future is dropped. Not
    /// cancel safe in tokio's sense: a dropped wait loses its place in the
    /// queue.
    fn acquire_shared(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<LockGuard>> + Send;

    /// One attempt at a shared hold: `Ok(None)` when an exclusive holder
    /// has the key, or an exclusive request is queued for it (a reader
    /// never passes a waiting writer).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (it never queues): a hold taken for a dropped call is
    /// released, so calling again finds the key as it was.
    fn try_lock_shared(&self, key: &str) -> impl Future<Output = Result<Option<LockGuard>>> + Send {
        async move {
            match self.acquire_shared(key, Some(Duration::ZERO)).await {
                Ok(guard) => Ok(Some(guard)),
                Err(e) if e.is_timeout() => Ok(None),
                Err(e) => Err(e),
            }
        }
    }
}
