//! [`SemaphorePermit`]: one held slot of a [`Semaphore`](super::Semaphore).

use std::fmt;

use crate::ports::error::Result;
use crate::ports::locks::{LockGuard, LockInfo, LossSignal};

/// One permit of a [`Semaphore`](super::Semaphore): its slot's lock.
/// Dropping it gives the permit back (in the background).
#[must_use = "dropping the permit gives it back at once"]
pub struct SemaphorePermit {
    slot: u32,
    guard: LockGuard,
}

impl SemaphorePermit {
    pub(super) fn new(slot: u32, guard: LockGuard) -> Self {
        Self { slot, guard }
    }

    /// Which slot this permit holds (`0 <= slot < permits`).
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The slot's lock key, `"{name}#permit/{slot}"`.
    pub fn key(&self) -> &str {
        self.guard.key()
    }

    /// The slot's advisory-lock id.
    pub fn lock_id(&self) -> i64 {
        self.guard.lock_id()
    }

    /// What is known about the slot's lock.
    pub fn info(&self) -> &LockInfo {
        self.guard.info()
    }

    /// True once the permit has been lost (its session ended).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// A cloneable handle on the loss of the permit.
    pub fn loss_signal(&self) -> LossSignal {
        self.guard.loss_signal()
    }

    /// Resolves when the permit is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is lost by dropping the future.
    pub async fn lost(&self) {
        self.guard.lost().await
    }

    /// Gives the permit back and waits until that is confirmed.
    ///
    /// # Cancel safety
    ///
    /// The permit is consumed when this is called. If the future is
    /// dropped before it completes, the release still happens in the
    /// background; only its outcome is lost.
    pub async fn release(self) -> Result<()> {
        self.guard.release().await
    }

    /// The slot's lock guard.
    pub fn into_guard(self) -> LockGuard {
        self.guard
    }
}

impl fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("slot", &self.slot)
            .field("key", &self.key())
            .field("lost", &self.is_lost())
            .finish()
    }
}
