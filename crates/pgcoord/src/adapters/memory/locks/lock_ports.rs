//! [`InMemoryLockManager`] as the lock ports: [`DistributedLock`],
//! [`SharedLock`] and [`LockRegistry`].

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Held, InMemoryLockManager};
use crate::ports::error::{LockNotHeldError, Result};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{DistributedLock, LockGuard, LockRegistry};
use crate::ports::shared_locks::{LockMode, SharedLock};

impl DistributedLock for InMemoryLockManager {
    /// Acquires `key`, queueing behind earlier waiters of either mode
    /// (first come, first served).
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped (a lock handed to a dropped waiter goes to
    /// the next one); not cancel safe: the dropped wait loses its place.
    async fn acquire(&self, key: &str, timeout: Option<Duration>) -> Result<LockGuard> {
        self.acquire_mode(key, timeout, LockMode::Exclusive).await
    }

    /// True unless built with [`InMemoryLockManager::without_fencing`].
    fn fences(&self) -> bool {
        self.fencing()
    }

    /// # Cancel safety
    ///
    /// Cancel safe: its one await (a yield to the runtime) comes before
    /// anything is taken, and the rest completes without awaiting.
    async fn try_lock(&self, key: &str) -> Result<Option<LockGuard>> {
        let lock_id = checked_lock_id(key, Some(Duration::ZERO))?;
        // Answered without awaiting: a loop of tries must still give the
        // runtime's other tasks their turn (tokio's cooperative budget).
        tokio::task::consume_budget().await;
        match self.take_or_queue(lock_id, key, LockMode::Exclusive, false) {
            Ok(held) => self.guard_for(held, Some(Duration::ZERO)).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// # Cancel safety
    ///
    /// The release happens when this is called; a dropped future loses only the outcome.
    fn release(&self, key: &str) -> impl std::future::Future<Output = Result<()>> + Send {
        let lock_id = crate::lock_id_for_key(key);
        let held = {
            let mut state = self.inner.lock();
            let token = state
                .manual
                .iter()
                .find(|(_, h)| h.lock_id == lock_id && *h.info.key == *key)
                .map(|(t, _)| *t);
            token.and_then(|t| state.manual.remove(&t))
        };
        let outcome = match held {
            Some(h) => {
                drop(h);
                Ok(())
            }
            None => Err(LockNotHeldError::new(key).into()),
        };
        std::future::ready(outcome)
    }

    fn is_held(&self, key: &str) -> bool {
        let lock_id = crate::lock_id_for_key(key);
        let state = self.inner.lock();
        state
            .slots
            .get(&lock_id)
            .is_some_and(|s| !s.holders.is_empty())
    }
}

impl SharedLock for InMemoryLockManager {
    /// Acquires a shared hold of `key`, queueing behind earlier waiters of
    /// either mode.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped; not cancel safe: the dropped wait loses
    /// its place.
    async fn acquire_shared(&self, key: &str, timeout: Option<Duration>) -> Result<LockGuard> {
        self.acquire_mode(key, timeout, LockMode::Shared).await
    }
}

impl LockRegistry for InMemoryLockManager {
    /// Releases every held lock; guards still alive observe a loss (a
    /// manual lock's signal does not fire), and an acquisition handed a
    /// lock but not yet returned fails.
    ///
    /// # Cancel safety
    ///
    /// The locks are released when this is called.
    fn release_all(&self) -> impl std::future::Future<Output = Result<usize>> + Send {
        std::future::ready(Ok(self.release_where(|_| true, false)))
    }

    fn held_lock_count(&self) -> usize {
        self.inner.lock().held
    }
}

impl InMemoryLockManager {
    /// Releases every hold of the lock ids `which` selects and returns how
    /// many. Guards see a loss; a manual lock's signal fires only with
    /// `manual_lost` (a simulated loss: its session died), not for
    /// `release_all`, which gives manual locks back as `release(key)` does.
    pub(super) fn release_where(&self, which: impl Fn(i64) -> bool, manual_lost: bool) -> usize {
        let (holders, manual) = {
            let mut state = self.inner.lock();
            let tokens: Vec<u64> = state
                .manual
                .iter()
                .filter(|(_, h)| which(h.lock_id))
                .map(|(t, _)| *t)
                .collect();
            let manual: Vec<Held> = tokens
                .iter()
                .filter_map(|t| state.manual.remove(t))
                .collect();
            let holders: Vec<(i64, u64, CancellationToken)> = state
                .slots
                .iter()
                .filter(|(id, _)| which(**id))
                .flat_map(|(id, s)| s.holders.iter().map(|h| (*id, h.token, h.loss.clone())))
                .collect();
            (holders, manual)
        };
        let manual_tokens: Vec<u64> = manual.iter().map(|h| h.token).collect();
        let count = holders.len();
        drop(manual);
        for (lock_id, token, loss) in holders {
            if manual_lost || !manual_tokens.contains(&token) {
                loss.cancel();
            }
            self.inner.release_token(lock_id, token);
        }
        count
    }
}
