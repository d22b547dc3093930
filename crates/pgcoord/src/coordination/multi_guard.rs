//! [`MultiLockGuard`]: the locks of one [`acquire_many`](super::acquire_many) call.

use std::fmt;

use futures_util::future::join_all;

use crate::ports::error::Result;
use crate::ports::locks::{LockGuard, LossSignal};

/// Every lock of a set taken by [`acquire_many`](super::acquire_many), in
/// canonical order. Dropping it releases them all (in the background).
///
/// The set counts as lost as soon as any member is lost: that member's
/// session ended, so the set is no longer held as a whole.
#[must_use = "dropping the guard releases every lock of the set at once"]
pub struct MultiLockGuard {
    guards: Vec<LockGuard>,
    loss: LossSignal,
}

impl MultiLockGuard {
    pub(super) fn new(guards: Vec<LockGuard>) -> Self {
        let loss = LossSignal::any(guards.iter().map(LockGuard::loss_signal));
        Self { guards, loss }
    }

    /// The keys held, in canonical order (by lock id), without duplicates.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.guards.iter().map(LockGuard::key)
    }

    /// The member guards, in canonical order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// How many distinct locks are held.
    pub fn len(&self) -> usize {
        self.guards.len()
    }

    /// True for the guard of an empty set.
    pub fn is_empty(&self) -> bool {
        self.guards.is_empty()
    }

    /// True once any member has been lost.
    pub fn is_lost(&self) -> bool {
        self.loss.is_lost()
    }

    /// A cloneable handle that fires when any member is lost.
    pub fn loss_signal(&self) -> LossSignal {
        self.loss.clone()
    }

    /// Resolves when any member is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is lost by dropping the future.
    pub async fn lost(&self) {
        self.loss.lost().await
    }

    /// Releases every lock of the set, concurrently, and waits for all.
    /// Every member is released even when some fail; the first failure is
    /// returned (for example [`Error::LockLost`](crate::Error::LockLost)
    /// when a member had been lost).
    ///
    /// # Cancel safety
    ///
    /// The guard is consumed when this is called. If the future is dropped
    /// before it completes, the releases still happen in the background;
    /// only their outcome is lost.
    pub async fn release(self) -> Result<()> {
        let outcomes = join_all(self.guards.into_iter().map(LockGuard::release)).await;
        outcomes.into_iter().collect()
    }

    /// The member guards, to be released one by one.
    pub fn into_guards(self) -> Vec<LockGuard> {
        self.guards
    }
}

impl fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("keys", &self.keys().collect::<Vec<_>>())
            .field("lost", &self.is_lost())
            .finish()
    }
}
