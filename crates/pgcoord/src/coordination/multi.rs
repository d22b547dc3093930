//! [`acquire_many`]: every key of a set, or none.

use std::time::Duration;

use futures_util::future::{join_all, select_all};
use tokio::time::Instant;

use super::multi_guard::MultiLockGuard;
use crate::ports::deadline::deadline_in;
use crate::ports::error::{AcquireFailure, Error, LockAcquisitionError, Result};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{DistributedLock, LockGuard};

/// Acquires every key of `keys`, or none: one deadline (`timeout`) for the
/// whole set, with the semantics of [`DistributedLock::acquire`] (`None`:
/// wait as long as it takes, as for a timeout too long for the clock such
/// as `Duration::MAX`; zero: one attempt).
///
/// Keys are de-duplicated by lock id and taken in canonical order (by
/// [`lock_id_for_key`](crate::lock_id_for_key), then by key), so callers
/// with overlapping sets never deadlock each other. An empty set gives an
/// empty guard.
///
/// How: every key is tried at once, concurrently, without waiting (the
/// PostgreSQL adapter batches concurrent tries on a batched session into one
/// statement, so an uncontended set costs about one round trip per shared
/// session). If some key is held elsewhere, only the keys below the first
/// missing one in canonical order are kept, the others are given back, and
/// the missing key is waited for in the lock's fair queue; after each grant
/// the remaining keys are tried at once again. A key lost while the caller
/// waits (its session ended) ends the wait: the keys from the lost one up
/// are given back and taken again in order, so a set is never returned
/// with a key known to be lost. While it waits, a caller
/// holds only keys below the one it waits for: that order is what rules out
/// deadlocks among callers of this function (and with any code that waits
/// for keys in the same order).
///
/// On a timeout the error is the one of the key that was not granted in
/// time, carrying the caller's whole `timeout`; any other acquisition error
/// (a failure to connect during the tries) carries that `timeout` too, on
/// whichever key's try reported it. On any error nothing of the set stays
/// held.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use pgcoord::coordination::acquire_many;
/// use pgcoord::{DistributedLock, InMemoryLockManager};
///
/// let locks = InMemoryLockManager::new(None);
/// // A transfer touches two accounts; another transfer may touch them in
/// // the other order: the canonical order keeps the two from deadlocking.
/// let both = acquire_many(&locks, &["account:7", "account:3"], Some(Duration::from_secs(5))).await?;
/// assert_eq!(both.len(), 2);
/// assert!(locks.is_held("account:3") && locks.is_held("account:7"));
///
/// // Someone else wants account:3 and account:9: not now, and it keeps neither.
/// let err = acquire_many(&locks, &["account:9", "account:3"], Some(Duration::ZERO)).await.unwrap_err();
/// assert!(err.is_timeout() && !locks.is_held("account:9"));
///
/// both.release().await?;
/// assert!(!locks.is_held("account:3") && !locks.is_held("account:7"));
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
///
/// # Cancel safety
///
/// Leaks nothing when dropped at any await point: every lock taken so far
/// is released (in the background), so no key of the set stays held. Not
/// cancel safe in tokio's sense: a dropped wait loses its place in the
/// lock's queue, as [`DistributedLock::acquire`] does.
pub async fn acquire_many<L, K>(
    locks: &L,
    keys: &[K],
    timeout: Option<Duration>,
) -> Result<MultiLockGuard>
where
    L: DistributedLock + ?Sized,
    K: AsRef<str> + Sync,
{
    let deadline = deadline_in(timeout);
    let keys = canonical(keys, timeout)?;
    let mut held: Vec<LockGuard> = Vec::with_capacity(keys.len());
    loop {
        // A try's error (say, connecting failed) carries the try's zero
        // timeout: give it the caller's, as for the waits below.
        try_rest(locks, &keys, &mut held)
            .await
            .map_err(|e| with_timeout(e, timeout))?;
        let Some(next) = keys.get(held.len()) else {
            return Ok(MultiLockGuard::new(held));
        };
        if timeout.is_some_and(|t| t.is_zero()) {
            // One attempt of the whole set, and it failed.
            return Err(LockAcquisitionError::new(*next, AcquireFailure::Timeout, timeout).into());
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        // While it waits, a key it holds may be lost (its session ended):
        // the wait is then given up, and the keys from the lost one up are
        // given back and taken again, in order, rather than waited on to
        // end in a set with a key missing.
        let waited = tokio::select! {
            granted = locks.acquire(next, left) => Some(granted),
            () = any_lost(&held) => None,
        };
        match waited {
            Some(Ok(guard)) => held.push(guard),
            Some(Err(e)) => return Err(with_timeout(e, timeout)),
            None => {}
        }
        // Also a loss noticed only as the grant came.
        if let Some(lost) = held.iter().position(LockGuard::is_lost) {
            held.truncate(lost);
        }
    }
}

/// Resolves once any of `held` is lost (never, for none).
async fn any_lost(held: &[LockGuard]) {
    if held.is_empty() {
        return std::future::pending().await;
    }
    select_all(held.iter().map(|g| Box::pin(g.lost()))).await;
}

/// `e` with the caller's `timeout` when it is an acquisition error.
fn with_timeout(e: Error, timeout: Option<Duration>) -> Error {
    match e {
        Error::LockAcquisition(mut a) => {
            a.timeout = timeout;
            Error::LockAcquisition(a)
        }
        other => other,
    }
}

/// The keys, checked, de-duplicated by lock id, in canonical order.
fn canonical<K: AsRef<str>>(keys: &[K], timeout: Option<Duration>) -> Result<Vec<&str>> {
    let mut ids = Vec::with_capacity(keys.len());
    for key in keys {
        let key = key.as_ref();
        ids.push((checked_lock_id(key, timeout)?, key));
    }
    ids.sort_unstable();
    ids.dedup_by_key(|(id, _)| *id);
    Ok(ids.into_iter().map(|(_, key)| key).collect())
}

/// Tries every key after the held prefix at once; keeps those below the
/// first one that is missing (in canonical order) and gives the others back.
async fn try_rest<L: DistributedLock + ?Sized>(
    locks: &L,
    keys: &[&str],
    held: &mut Vec<LockGuard>,
) -> Result<()> {
    let rest = &keys[held.len()..];
    if rest.is_empty() {
        return Ok(());
    }
    let tries = join_all(rest.iter().map(|key| locks.try_lock(key))).await;
    let mut outcomes = Vec::with_capacity(tries.len());
    for t in tries {
        // On an error the guards taken by the other tries drop here.
        outcomes.push(t?);
    }
    for outcome in outcomes {
        match outcome {
            Some(guard) => held.push(guard),
            // The rest is above the first missing key: dropping the
            // iterator gives those guards back.
            None => break,
        }
    }
    Ok(())
}
