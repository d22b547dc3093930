//! [`LeaderObserver`] for [`InMemoryLockManager`].

use super::InMemoryLockManager;
use crate::coordination::{Leader, LeaderObserver};
use crate::ports::error::Result;
use crate::ports::locks::DistributedLock;

/// One manager is the whole world of the in-memory adapter: the holder is
/// "this manager" (no holder id or pid to tell candidates apart), with the
/// key's current term.
impl LeaderObserver for InMemoryLockManager {
    async fn leader_of(&self, key: &str) -> Result<Option<Leader>> {
        Ok(self.is_held(key).then(|| Leader {
            holder_id: None,
            pid: None,
            since: None,
            term: self.current_fence(key),
        }))
    }
}
