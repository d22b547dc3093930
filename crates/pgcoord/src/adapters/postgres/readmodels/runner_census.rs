//! [`RunnerCensus`] for the PostgreSQL lock manager: the holders of a key,
//! from `pg_locks`, across every process of the database.

use crate::adapters::postgres::PostgresLockManager;
use crate::adapters::sql::RunnerCensus;
use crate::ports::error::Result;

impl RunnerCensus for PostgresLockManager {
    /// One [`holders`](PostgresLockManager::holders) query for `key`; each
    /// session holding it counts once.
    async fn holders_of(&self, key: &str) -> Result<usize> {
        let locks = self.holders(&[key]).await?;
        Ok(locks.iter().map(|l| l.holders.len()).sum())
    }
}
