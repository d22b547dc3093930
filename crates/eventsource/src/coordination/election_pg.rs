//! [`LeaderObserver`] for [`PostgresLockManager`]: the holder of the
//! election's lock, from `pg_locks` and `pg_stat_activity` (every process
//! of the database, other languages included).

use super::election_watch::{Leader, LeaderObserver};
use crate::adapters::postgres::PostgresLockManager;
use crate::ports::error::Result;

/// Through [`PostgresLockManager::holders`], on a short-lived session of
/// its own. The term is not read (it lives in the fence table, which the
/// manager's sessions do not query for this): `term` is `None`.
impl LeaderObserver for PostgresLockManager {
    async fn leader_of(&self, key: &str) -> Result<Option<Leader>> {
        let locks = self.holders(&[key]).await?;
        let holder = locks
            .into_iter()
            .filter(|l| l.key.as_deref() == Some(key))
            .find_map(|l| l.holders.into_iter().next());
        Ok(holder.map(|h| Leader {
            holder_id: h.holder_id,
            pid: Some(h.pid),
            since: h.since.or(h.backend_start),
            term: None,
        }))
    }
}
