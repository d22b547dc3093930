//! [`DynLockManager`]: the lock ports as a trait object.
//!
//! [`DistributedLock`] and [`LockRegistry`] return `impl Future` (no boxing
//! on the hot path) and [`DistributedLock::with_lock`] is generic, so they
//! cannot be held as `dyn`. Services that inject their ports as trait
//! objects use this companion trait instead; every implementation of the
//! two ports implements it, and `Arc<dyn DynLockManager>` implements the
//! two ports again, so generic code accepts it too. (With both traits in
//! scope, method calls on the `Arc` are ambiguous: import the one you use.)
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use pgcoord::{DynLockManager, InMemoryLockManager};
//!
//! struct Cutover {
//!     locks: Arc<dyn DynLockManager>,
//! }
//!
//! impl Cutover {
//!     async fn run(&self, tenant: &str) -> pgcoord::Result<()> {
//!         let guard = self.locks.acquire(tenant, Some(Duration::from_secs(5))).await?;
//!         // ... the cutover ...
//!         guard.release().await
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let cutover = Cutover { locks: Arc::new(InMemoryLockManager::new(None)) };
//! cutover.run("tenant-42").await?;
//! // Generic code takes the trait object as well.
//! async fn held<L: pgcoord::DistributedLock>(locks: &L, key: &str) -> bool {
//!     locks.is_held(key)
//! }
//! assert!(!held(&cutover.locks, "tenant-42").await);
//! # Ok::<(), pgcoord::Error>(())
//! # }).unwrap();
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::error::Result;
use super::locks::{BoxFuture, DistributedLock, LockGuard, LockRegistry};

/// The object-safe form of [`DistributedLock`] + [`LockRegistry`]; see the
/// module docs. Each method behaves (and is cancel safe or not) exactly as
/// the port method of the same name.
pub trait DynLockManager: Send + Sync {
    /// [`DistributedLock::acquire`].
    fn acquire<'a>(
        &'a self,
        key: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<LockGuard>>;
    /// [`DistributedLock::try_lock`].
    fn try_lock<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<LockGuard>>>;
    /// [`DistributedLock::try_lock_any`].
    fn try_lock_any<'a>(
        &'a self,
        keys: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<(usize, LockGuard)>>>;
    /// [`DistributedLock::release`].
    fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>>;
    /// [`DistributedLock::is_held`].
    fn is_held(&self, key: &str) -> bool;
    /// [`DistributedLock::fences`].
    fn fences(&self) -> bool;
    /// [`LockRegistry::release_all`].
    fn release_all(&self) -> BoxFuture<'_, Result<usize>>;
    /// [`LockRegistry::held_lock_count`].
    fn held_lock_count(&self) -> usize;
}

impl<T: DistributedLock + LockRegistry> DynLockManager for T {
    fn acquire<'a>(
        &'a self,
        key: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<LockGuard>> {
        Box::pin(DistributedLock::acquire(self, key, timeout))
    }

    fn try_lock<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<LockGuard>>> {
        Box::pin(DistributedLock::try_lock(self, key))
    }

    fn try_lock_any<'a>(
        &'a self,
        keys: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<(usize, LockGuard)>>> {
        Box::pin(DistributedLock::try_lock_any(self, keys))
    }

    fn release<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(DistributedLock::release(self, key))
    }

    fn is_held(&self, key: &str) -> bool {
        DistributedLock::is_held(self, key)
    }

    fn fences(&self) -> bool {
        DistributedLock::fences(self)
    }

    fn release_all(&self) -> BoxFuture<'_, Result<usize>> {
        Box::pin(LockRegistry::release_all(self))
    }

    fn held_lock_count(&self) -> usize {
        LockRegistry::held_lock_count(self)
    }
}

impl DistributedLock for Arc<dyn DynLockManager> {
    async fn acquire(&self, key: &str, timeout: Option<Duration>) -> Result<LockGuard> {
        DynLockManager::acquire(&**self, key, timeout).await
    }

    async fn try_lock(&self, key: &str) -> Result<Option<LockGuard>> {
        DynLockManager::try_lock(&**self, key).await
    }

    async fn try_lock_any(&self, keys: &[&str]) -> Result<Option<(usize, LockGuard)>> {
        DynLockManager::try_lock_any(&**self, keys).await
    }

    // Not `async fn`: the release is sent when it is called, as the port
    // promises, not when the future is first polled.
    fn release<'a>(&'a self, key: &'a str) -> impl Future<Output = Result<()>> + Send + 'a {
        DynLockManager::release(&**self, key)
    }

    fn is_held(&self, key: &str) -> bool {
        DynLockManager::is_held(&**self, key)
    }

    fn fences(&self) -> bool {
        DynLockManager::fences(&**self)
    }
}

impl LockRegistry for Arc<dyn DynLockManager> {
    // Not `async fn`, as `release` above.
    fn release_all(&self) -> impl Future<Output = Result<usize>> + Send {
        DynLockManager::release_all(&**self)
    }

    fn held_lock_count(&self) -> usize {
        DynLockManager::held_lock_count(&**self)
    }
}
