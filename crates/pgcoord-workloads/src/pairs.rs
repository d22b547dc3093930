//! Lock + unlock pairs per second: one task on one key, and many tasks
//! each on a key of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::adapters::postgres::PostgresLockManager;
use pgcoord::DistributedLock;

/// `acquire` + `release` of `key` in a loop for `window`, one task:
/// pairs per second.
pub async fn sequential_pairs(
    locks: &PostgresLockManager,
    key: &str,
    window: Duration,
) -> pgcoord::Result<f64> {
    let start = Instant::now();
    let mut pairs = 0u64;
    while start.elapsed() < window {
        let guard = locks.acquire(key, None).await?;
        guard.release().await?;
        pairs += 1;
    }
    Ok(pairs as f64 / start.elapsed().as_secs_f64())
}

/// `tasks` tasks of one manager, each looping `acquire` + `release` on a
/// key of its own (`{prefix}/{n}`) for `window`: pairs per second in all.
pub async fn concurrent_pairs(
    locks: &PostgresLockManager,
    prefix: &str,
    tasks: usize,
    window: Duration,
) -> pgcoord::Result<f64> {
    let start = Arc::new(Instant::now());
    let mut handles = Vec::with_capacity(tasks);
    for n in 0..tasks {
        let (locks, key, start) = (locks.clone(), format!("{prefix}/{n}"), start.clone());
        handles.push(tokio::spawn(async move {
            let mut pairs = 0u64;
            while start.elapsed() < window {
                let guard = locks.acquire(&key, None).await?;
                guard.release().await?;
                pairs += 1;
            }
            Ok::<_, pgcoord::Error>(pairs)
        }));
    }
    let mut pairs = 0;
    for h in handles {
        pairs += h.await.map_err(|e| {
            pgcoord::Error::InvalidArgument(format!("a workload task failed: {e}"))
        })??;
    }
    Ok(pairs as f64 / start.elapsed().as_secs_f64())
}
