//! Hand-over latency: from the holder's release to the waiter, queued
//! inside PostgreSQL, holding the lock.

use std::time::{Duration, Instant};

use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

/// How long a waiter may take to show up queued before the run fails.
const QUEUE_LIMIT: Duration = Duration::from_secs(10);

/// Hand-overs between `holder` and `waiter` (two managers) for `window`,
/// each on a key of its own (`{prefix}/{n}`): the holder takes the key,
/// the waiter queues for it (seen in `pg_locks` through the holder's
/// inspection session), the holder releases; the sample is the time from
/// the release call to the waiter's `acquire` returning.
///
/// # Cancel safety
///
/// Not cancel safe (the samples are lost); leak-free: the holder's guard
/// is released in the background when dropped, and the waiter's task ends
/// once it is served, dropping (releasing) its guard.
pub async fn handover(
    holder: &PostgresLockManager,
    waiter: &PostgresLockManager,
    prefix: &str,
    window: Duration,
) -> pgcoord::Result<Vec<Duration>> {
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut n = 0u64;
    while start.elapsed() < window || samples.is_empty() {
        let key = format!("{prefix}/{n}");
        n += 1;
        let guard = holder.acquire(&key, None).await?;
        let (w, k) = (waiter.clone(), key.clone());
        let task = tokio::spawn(async move {
            let g = w.acquire(&k, None).await?;
            Ok::<_, pgcoord::Error>((g, Instant::now()))
        });
        let queued = Instant::now();
        loop {
            let locks = holder.holders(&[&key]).await?;
            if locks.first().is_some_and(|l| !l.waiters.is_empty()) {
                break;
            }
            if queued.elapsed() > QUEUE_LIMIT {
                task.abort();
                return Err(pgcoord::Error::InvalidArgument(format!(
                    "hand-over: the waiter did not queue for {key} within {QUEUE_LIMIT:?}"
                )));
            }
            tokio::task::yield_now().await;
        }
        let released = Instant::now();
        guard.release().await?;
        let (g, at) = task.await.map_err(|e| {
            pgcoord::Error::InvalidArgument(format!("the waiter task failed: {e}"))
        })??;
        samples.push(at.saturating_duration_since(released));
        g.release().await?;
    }
    Ok(samples)
}
