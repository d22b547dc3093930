//! [`acquire_many`]: every key of a set, or none.

use std::time::Duration;

use futures_util::future::{join_all, select_all};
use tokio::time::Instant;

use super::multi_guard::MultiLockGuard;
use crate::ports::deadline::deadline_in;
use crate::ports::error::{AcquireFailure, BackendErrorKind, Error, LockAcquisitionError, Result};
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
/// with a key known to be lost. A failure that time mends, met by a try or
/// a wait once the set is under way (a key held or a wait begun) while a
/// finite `timeout` has time left, starts the set over: a
/// session that ended (the server restarted, the waiting session was
/// terminated), a server that stopped answering, or a connection refused
/// for now (no server answering, one shutting down or starting up, or out
/// of connection slots: SQLSTATE 57P03, 57P01, 53300). Every key held is
/// given back, and after a pause (50 ms, doubling up to 1 s, never past the
/// deadline) the set is taken again from its first key; so a restart of
/// the server within the timeout ends in the set held. Without a timeout
/// (`None`) such a failure is returned, as [`DistributedLock::acquire`]
/// returns it, so that a server that never comes back does not keep the
/// call waiting unseen; and so is one met by the very first try, before
/// anything was held or waited for (a server down from the start), so that
/// a caller that retries on its own can say so. While it waits, a caller
/// holds only keys below the one it waits for: that order is what rules out
/// deadlocks among callers of this function (and with any code that waits
/// for keys in the same order).
///
/// On a timeout the error is the one of the key that was not granted in
/// time, carrying the caller's whole `timeout`; any other acquisition error
/// (a failure no wait mends, or the last of those above when the timeout
/// ran out) carries that `timeout` too, on whichever key's try or wait
/// reported it. On any error nothing of the set stays
/// held: the keys taken so far are released, and the error is returned
/// only once those releases are done (a release that fails, for a key lost
/// meanwhile, leaves the key free too and is not reported). Right after the
/// error this manager holds none of the set, and another can take any key
/// of it at once.
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
/// is released, so no key of the set stays held. A dropped future cannot
/// wait for those releases, though: they go on in the background (as a
/// dropped [`LockGuard`]'s), so for a moment after the drop (on PostgreSQL,
/// about a round trip) keys of the set may still be held, by
/// [`is_held`](DistributedLock::is_held) and for other managers. Only a
/// returned error guarantees that they are already free. Not cancel safe in
/// tokio's sense: a dropped wait loses its place in the lock's queue, as
/// [`DistributedLock::acquire`] does.
pub async fn acquire_many<L, K>(
    locks: &L,
    keys: &[K],
    timeout: Option<Duration>,
) -> Result<MultiLockGuard>
where
    L: DistributedLock + ?Sized,
    K: AsRef<str> + Sync,
{
    let keys = canonical(keys, timeout)?;
    let mut held: Vec<LockGuard> = Vec::with_capacity(keys.len());
    match take_all(locks, &keys, timeout, &mut held).await {
        Ok(()) => Ok(MultiLockGuard::new(held)),
        Err(e) => {
            // Given back before the error is: right after it, none of the
            // set is held. (Dropped here, the rest goes in the background.)
            give_back(held).await;
            Err(e)
        }
    }
}

/// Takes `keys` (canonical) into `held`, all of them or up to an error.
async fn take_all<L: DistributedLock + ?Sized>(
    locks: &L,
    keys: &[&str],
    timeout: Option<Duration>,
    held: &mut Vec<LockGuard>,
) -> Result<()> {
    let deadline = deadline_in(timeout);
    let mut pause = FIRST_PAUSE;
    // Whether the set got anywhere (a key held, a wait begun): a failure
    // before that is returned at once, as a lone `acquire` returns it, so
    // that a caller retrying on its own (the CLI, which says so on
    // stderr) is told of a server down from the start; one after it (a
    // restart mid-way) starts the set over.
    let mut under_way = false;
    loop {
        // A try's error (say, connecting failed) carries the try's zero
        // timeout: give it the caller's, as for the waits below.
        if let Err(e) = try_rest(locks, keys, held).await {
            let under_way = under_way || !held.is_empty();
            start_over(e, timeout, deadline, under_way, &mut pause, held).await?;
            continue;
        }
        under_way = true;
        let Some(next) = keys.get(held.len()) else {
            return Ok(());
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
            () = any_lost(held) => None,
        };
        match waited {
            Some(Ok(guard)) => held.push(guard),
            Some(Err(e)) => {
                start_over(e, timeout, deadline, true, &mut pause, held).await?;
                continue;
            }
            None => {}
        }
        // Also a loss noticed only as the grant came.
        if let Some(lost) = held.iter().position(LockGuard::is_lost) {
            give_back(held.split_off(lost)).await;
        }
    }
}

/// The first pause before the set is taken again after a session ended or
/// the server refused a connection for now; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// After `e`, a try's or a wait's error: when it is one that time mends (a
/// session that ended, as in a restart; a server shutting down or starting
/// up, out of connection slots, or not reachable for now) and the caller's
/// finite timeout has time left, gives back every key held (those of a
/// restarted server are lost, though their loss may not have been seen
/// yet), pauses, and returns `Ok` so that the set is taken again from its
/// first key. Otherwise, `e` with the caller's timeout.
///
/// Without a timeout (`None`), `e` is returned: a server that never comes
/// back would otherwise keep the call waiting unseen for ever.
async fn start_over(
    e: Error,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    under_way: bool,
    pause: &mut Duration,
    held: &mut Vec<LockGuard>,
) -> Result<()> {
    let mends = under_way && mended_by_time(&e);
    let Some(deadline) = deadline.filter(|d| *d > Instant::now() && mends) else {
        return Err(with_timeout(e, timeout));
    };
    give_back(std::mem::take(held)).await;
    tokio::time::sleep_until(deadline.min(Instant::now() + *pause)).await;
    *pause = (*pause * 2).min(MAX_PAUSE);
    Ok(())
}

/// True for an error that a later attempt may not meet: the session ended
/// (a restart, a terminated backend), the server stopped answering, or a
/// connection was refused for now (shutting down or starting up, 57P03;
/// terminated by an administrator, 57P01; out of connection slots, 53300;
/// or no server to answer, no SQLSTATE).
fn mended_by_time(e: &Error) -> bool {
    let Some(backend) = e.as_backend() else {
        return false;
    };
    match backend.kind() {
        BackendErrorKind::Closed | BackendErrorKind::NoAnswer => true,
        BackendErrorKind::Connect => backend
            .code()
            .is_none_or(|c| matches!(c.code(), "57P03" | "57P01" | "53300")),
        _ => false,
    }
}

/// Releases `guards` and waits until every release is done. A failed
/// release (the lock was lost meanwhile) leaves the key free all the same,
/// so its error is not reported.
///
/// # Cancel safety
///
/// Dropped, the releases not yet done go ahead in the background.
async fn give_back(guards: Vec<LockGuard>) {
    if !guards.is_empty() {
        join_all(guards.into_iter().map(LockGuard::release)).await;
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
    if let Some(failed) = tries.iter().position(Result::is_err) {
        // The guards the other tries took are given back first.
        let mut tries = tries;
        let err = tries.swap_remove(failed).err();
        give_back(tries.into_iter().filter_map(|t| t.ok().flatten()).collect()).await;
        return Err(err.expect("the failed try"));
    }
    let mut outcomes = tries.into_iter().map(|t| t.ok().flatten());
    for outcome in outcomes.by_ref() {
        match outcome {
            Some(guard) => held.push(guard),
            None => break,
        }
    }
    // The rest is above the first missing key: given back before the
    // caller waits for that key, or returns.
    give_back(outcomes.flatten().collect()).await;
    Ok(())
}
