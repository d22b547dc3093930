//! What tests of lock users need beyond the ports: the current fencing
//! token of a key, and a simulated loss.

use super::InMemoryLockManager;

impl InMemoryLockManager {
    /// The fencing token of the latest acquisition of `key` (`None` if it
    /// was never acquired): what a protected resource compares a writer's
    /// token with. Every grant carries a token one greater than the last.
    pub fn current_fence(&self, key: &str) -> Option<u64> {
        let lock_id = crate::lock_id_for_key(key);
        self.inner.lock().fences.get(&lock_id).copied()
    }

    /// Makes the holder of `key` lose its lock as a dead session would (the
    /// next waiter gets it, the holder's [`LossSignal`](crate::LossSignal) fires); for testing
    /// code that reacts to lock loss. Returns whether the key was held.
    pub fn simulate_loss(&self, key: &str) -> bool {
        let lock_id = crate::lock_id_for_key(key);
        let (token, manual) = {
            let mut state = self.inner.lock();
            let manual = state.manual.remove(&lock_id);
            let Some(holder) = state.slots.get(&lock_id).and_then(|s| s.holder.as_ref()) else {
                return false;
            };
            holder.loss.cancel();
            (holder.token, manual)
        };
        if let Some(m) = manual {
            drop(m);
        } else {
            self.inner.release_token(lock_id, token);
        }
        true
    }
}
