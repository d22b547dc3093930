//! Hand-over latency: from the holder's release to the waiter, queued
//! inside PostgreSQL, holding the lock.

use std::time::{Duration, Instant};

use pgcoord::error::{BackendError, BackendErrorKind};
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
            // A waiter that failed (its session could not be opened: a
            // role at its connection limit) never queues: its error is
            // the cause, not the wait below.
            if task.is_finished() {
                let failed = waiter_failed(task.await);
                return Err(failed.unwrap_or_else(|| {
                    pgcoord::Error::InvalidArgument(format!(
                        "hand-over: the waiter took {key} while the holder held it"
                    ))
                }));
            }
            if queued.elapsed() > QUEUE_LIMIT {
                task.abort();
                return Err(BackendError::new(
                    BackendErrorKind::NoAnswer,
                    format!(
                        "hand-over: the waiter's request for {key} did not show in pg_locks \
                         within {QUEUE_LIMIT:?}"
                    ),
                )
                .into());
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

/// The error of a waiter task that ended before it was served: its own,
/// or its panic's; `None` when it was granted (which it cannot be while
/// the holder holds the key).
fn waiter_failed(
    joined: Result<pgcoord::Result<(pgcoord::LockGuard, Instant)>, tokio::task::JoinError>,
) -> Option<pgcoord::Error> {
    match joined {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(pgcoord::Error::InvalidArgument(format!(
            "the waiter task failed: {e}"
        ))),
    }
}
