//! [`LeaderObserver`] for [`PostgresLockManager`]: the holder of the
//! election's lock, from `pg_locks` and `pg_stat_activity` (every process
//! of the database, other languages included).

use crate::adapters::postgres::PostgresLockManager;
use crate::coordination::{Leader, LeaderObserver};
use crate::ports::error::Result;

/// Through [`PostgresLockManager::holders`], on the manager's inspection
/// session (opened once, kept for the next looks); the term is the key's current fencing token (a fencing
/// manager's `holders()` reads the fence table).
impl LeaderObserver for PostgresLockManager {
    async fn leader_of(&self, key: &str) -> Result<Option<Leader>> {
        let locks = self.holders(&[key]).await?;
        let Some(lock) = locks.into_iter().find(|l| l.key.as_deref() == Some(key)) else {
            return Ok(None);
        };
        let fence = lock.fence;
        Ok(lock.holders.into_iter().next().map(|h| Leader {
            holder_id: h.holder_id,
            pid: Some(h.pid),
            since: h.since.or(h.backend_start),
            term: fence.and_then(|f| u64::try_from(f).ok()),
        }))
    }
}
