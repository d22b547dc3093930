//! Lock + unlock pairs per second: one task on one key, and many tasks
//! each on a key of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

/// `acquire` + `release` of `key` in a loop for `window`, one task:
/// pairs per second.
///
/// # Cancel safety
///
/// Not cancel safe (the count so far is lost); leak-free: a guard held
/// when the future is dropped is released in the background.
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
///
/// # Cancel safety
///
/// Not cancel safe (the counts are lost); leak-free: dropping the future
/// aborts its tasks (a `JoinSet`), whose guards are released in the
/// background.
pub async fn concurrent_pairs(
    locks: &PostgresLockManager,
    prefix: &str,
    tasks: usize,
    window: Duration,
) -> pgcoord::Result<f64> {
    let start = Arc::new(Instant::now());
    let mut handles = tokio::task::JoinSet::new();
    for n in 0..tasks {
        let (locks, key, start) = (locks.clone(), format!("{prefix}/{n}"), start.clone());
        handles.spawn(async move {
            let mut pairs = 0u64;
            while start.elapsed() < window {
                let guard = locks.acquire(&key, None).await?;
                guard.release().await?;
                pairs += 1;
            }
            Ok::<_, pgcoord::Error>(pairs)
        });
    }
    let mut pairs = 0;
    while let Some(done) = handles.join_next().await {
        pairs += done.map_err(|e| {
            pgcoord::Error::InvalidArgument(format!("a workload task failed: {e}"))
        })??;
    }
    Ok(pairs as f64 / start.elapsed().as_secs_f64())
}
