//! What tests of lock users need beyond the ports: the current fencing
//! token of a key, and a simulated loss.

use super::InMemoryLockManager;

impl InMemoryLockManager {
    /// The fencing token of the latest exclusive acquisition of `key`
    /// (`None` if it was never acquired): what a protected resource
    /// compares a writer's token with. Every exclusive grant carries a
    /// token one greater than the last.
    pub fn current_fence(&self, key: &str) -> Option<u64> {
        let lock_id = crate::lock_id_for_key(key);
        self.inner.lock().fences.get(&lock_id).copied()
    }

    /// Makes every holder of `key` (one exclusive, or all shared ones) lose
    /// the lock as a dead session would: the next waiters get it, and the
    /// holders' [`LossSignal`](crate::LossSignal)s fire, a manual lock's
    /// included. A waiter that was handed the lock but has not yet returned
    /// its guard fails its acquisition instead. For testing code that
    /// reacts to lock loss. Returns whether the key was held.
    pub fn simulate_loss(&self, key: &str) -> bool {
        let lock_id = crate::lock_id_for_key(key);
        self.release_where(|id| id == lock_id, true) > 0
    }
}
