//! [`Semaphore`]: at most N holders of a name, across processes, on
//! advisory locks alone (no table).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::semaphore_permit::SemaphorePermit;
use crate::ports::deadline::deadline_in;
use crate::ports::error::{AcquireFailure, BackendErrorKind, Error, LockAcquisitionError, Result};
use crate::ports::lock_id::MAX_KEY_LEN;
use crate::ports::locks::DistributedLock;

/// The largest permit count a [`Semaphore`] accepts.
pub const MAX_PERMITS: u32 = 10_000;

/// The head waiter's first pause between two looks at the slots.
const FIRST_PAUSE: Duration = Duration::from_millis(1);
/// The default longest pause (see [`Semaphore::max_pause`]).
const DEFAULT_MAX_PAUSE: Duration = Duration::from_millis(20);
/// The shortest time slot `permits` must be seen held on every look before
/// the head waiter calls it a participant with more permits (or
/// [`Semaphore::max_pause`], if longer). A probe of the slot by a head
/// waiter that was dropped, or whose session is being ended, is given back
/// well within it; a participant with a larger count holds it for good.
const MISMATCH_AFTER: Duration = Duration::from_secs(1);

/// A counting semaphore: at most `permits` holders of `name` at once,
/// across every process that uses the same name and count on the same
/// lock space (for PostgreSQL: the same database).
///
/// Slot `i` (`0 <= i < permits`) is the lock key `"{name}#permit/{i}"`
/// ([`Semaphore::slot_key`]); a permit is one held slot, so a crashed
/// holder's permit comes back when its session ends. Waiters queue on the
/// turnstile key `"{name}#turnstile"` ([`Semaphore::turnstile_key`]): the
/// waiter holding it is the head of the queue and the only one that looks
/// at the slots; it gives the turnstile up once it has a permit. The ids
/// are [`lock_id_for_key`](crate::lock_id_for_key) of those keys, so a
/// service in another language takes part by locking the same keys.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use pgcoord::coordination::Semaphore;
/// use pgcoord::InMemoryLockManager;
///
/// let locks = InMemoryLockManager::new(None);
/// let exports = Semaphore::new(locks.clone(), "exports", 2)?;
/// let a = exports.acquire(Some(Duration::from_secs(5))).await?;
/// let b = exports.try_acquire().await?.expect("a second permit");
/// assert_ne!(a.slot(), b.slot());
/// assert!(exports.try_acquire().await?.is_none(), "only two at once");
/// a.release().await?;
/// let c = exports.acquire(Some(Duration::from_secs(5))).await?;
/// assert_eq!(c.key(), Semaphore::<InMemoryLockManager>::slot_key("exports", c.slot()));
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
///
/// A clone (for a manager that is `Clone`, as both of this crate's are)
/// is the same participant's handle, as cheap as cloning the manager and
/// two strings: hand one to each task instead of wrapping it in an `Arc`.
#[derive(Clone)]
pub struct Semaphore<L> {
    locks: L,
    name: String,
    permits: u32,
    /// The slot keys, and one more: slot `permits`, which only a
    /// participant with a larger count ever holds (shared by clones).
    slots: Arc<[String]>,
    turnstile: String,
    max_pause: Duration,
}

impl<L: DistributedLock> Semaphore<L> {
    /// A semaphore of `permits` (1 to [`MAX_PERMITS`]) on `name`, over
    /// `locks`. Every participant must use the same count; see
    /// `docs/primitives.md` for what happens when they do not.
    pub fn new(locks: L, name: impl Into<String>, permits: u32) -> Result<Self> {
        let name = name.into();
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::InvalidArgument(format!(
                "a semaphore needs 1 to {MAX_PERMITS} permits, not {permits}"
            )));
        }
        if name.len() + 32 > MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!(
                "a semaphore name may be {} bytes long, not {}",
                MAX_KEY_LEN - 32,
                name.len()
            )));
        }
        let slots = (0..=permits).map(|i| Self::slot_key(&name, i)).collect();
        let turnstile = Self::turnstile_key(&name);
        Ok(Self {
            locks,
            name,
            permits,
            slots,
            turnstile,
            max_pause: DEFAULT_MAX_PAUSE,
        })
    }

    /// The lock key of slot `slot` of semaphore `name`: `"{name}#permit/{slot}"`.
    pub fn slot_key(name: &str, slot: u32) -> String {
        format!("{name}#permit/{slot}")
    }

    /// The lock key waiters of semaphore `name` queue on: `"{name}#turnstile"`.
    pub fn turnstile_key(name: &str) -> String {
        format!("{name}#turnstile")
    }

    /// Sets the longest pause of the head waiter between two looks at the
    /// slots (default 20 ms; at least 1 ms). It waits for one slot in that
    /// pause, so a release of that slot reaches it at once; a release of
    /// another slot is seen at its next look.
    pub fn max_pause(mut self, pause: Duration) -> Self {
        self.max_pause = pause.max(FIRST_PAUSE);
        self
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The permit count.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The lock manager underneath.
    pub fn locks(&self) -> &L {
        &self.locks
    }

    fn slot_refs(&self, with_sentinel: bool) -> Vec<&str> {
        let n = self.permits as usize + usize::from(with_sentinel);
        self.slots[..n].iter().map(String::as_str).collect()
    }

    /// Takes a free permit without waiting; `Ok(None)` when all are held.
    ///
    /// It tries the slots with [`DistributedLock::try_lock_any`] (one by
    /// one unless the adapter does better), so it may take a slot that
    /// frees while the head waiter pauses: it never queues, so it cannot
    /// wait behind the waiters.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (it never queues): a slot taken for a dropped call is
    /// released, so calling again finds the semaphore as it was.
    pub async fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        let slots = self.slot_refs(false);
        Ok(self
            .locks
            .try_lock_any(&slots)
            .await?
            .map(|(i, guard)| SemaphorePermit::new(i as u32, guard)))
    }

    /// Takes a permit, waiting up to `timeout` (`None`, or a timeout too
    /// long for the clock such as `Duration::MAX`: as long as it takes;
    /// zero: one attempt, as [`try_acquire`](Self::try_acquire)).
    ///
    /// Waiters are served in arrival order: they queue on the turnstile
    /// (the lock's own fair queue: PostgreSQL's, across processes) and only
    /// the head waiter looks at the slots, pausing 1 ms, 2 ms, ... up to
    /// [`max_pause`](Self::max_pause) between looks while waiting for one
    /// slot. A newcomer's first try can still take a slot that frees during
    /// such a pause. Every acquisition error (a timeout, a failure to
    /// connect) is on the semaphore's name, with the caller's `timeout`; a
    /// participant created with more permits than this one is
    /// [`AcquireFailure::PermitCountMismatch`] when the head waiter sees it.
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped at any await point: a slot or turnstile
    /// taken for it is released. Not cancel safe in tokio's sense: a
    /// dropped wait loses its place in the queue, as
    /// `tokio::sync::Semaphore::acquire` does.
    pub async fn acquire(&self, timeout: Option<Duration>) -> Result<SemaphorePermit> {
        self.acquire_within(timeout)
            .await
            .map_err(|e| self.on_the_semaphore(e, timeout))
    }

    /// [`acquire`](Self::acquire), its errors as the lock manager gave
    /// them (on a slot or the turnstile, with that step's own timeout).
    async fn acquire_within(&self, timeout: Option<Duration>) -> Result<SemaphorePermit> {
        // From the call, not from the end of the first try: a slow first
        // try counts against the caller's timeout.
        let deadline = deadline_in(timeout);
        if let Some(permit) = self.try_acquire().await? {
            return Ok(permit);
        }
        if timeout.is_some_and(|t| t.is_zero()) {
            return Err(self.timed_out(timeout));
        }
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        // Queue behind the earlier waiters; the turnstile is released (by
        // drop) once this waiter has a permit or gives up.
        let _turnstile = match self.locks.acquire(&self.turnstile, left()).await {
            Ok(guard) => guard,
            Err(e) if e.is_timeout() => return Err(self.timed_out(timeout)),
            Err(e) => return Err(e),
        };
        let with_sentinel = self.slot_refs(true);
        let mismatch_after = self.max_pause.max(MISMATCH_AFTER);
        let mut pause = FIRST_PAUSE;
        let mut next_wait = 0usize;
        // Since when slot `permits` has been seen held by someone else.
        let mut sentinel_held: Option<Instant> = None;
        loop {
            match self.locks.try_lock_any(&with_sentinel).await? {
                Some((i, guard)) if i < self.permits as usize => {
                    return Ok(SemaphorePermit::new(i as u32, guard))
                }
                // Slot `permits` was free: the semaphore is full for
                // participants of this count. Give it back (confirmed, so
                // that the next look does not find this very probe) and wait.
                Some((_, sentinel)) => {
                    sentinel_held = None;
                    let _ = sentinel.release().await;
                }
                // Held elsewhere on every look for at least
                // `mismatch_after` (so not the probe of a dropped head
                // waiter, of this process or another, still being given
                // back): a participant with a larger count holds it.
                None => match sentinel_held {
                    Some(since) if since.elapsed() >= mismatch_after => {
                        return Err(LockAcquisitionError::new(
                            self.name.clone(),
                            AcquireFailure::PermitCountMismatch {
                                permits: self.permits,
                            },
                            timeout,
                        )
                        .into())
                    }
                    Some(_) => {}
                    None => sentinel_held = Some(Instant::now()),
                },
            }
            let this_pause = match left() {
                Some(l) if l.is_zero() => return Err(self.timed_out(timeout)),
                Some(l) => pause.min(l),
                None => pause,
            };
            // Pause by waiting for one slot (in turn): released, it comes
            // to this waiter through the lock's queue.
            let slot = next_wait % self.permits as usize;
            next_wait += 1;
            match self
                .locks
                .acquire(&self.slots[slot], Some(this_pause))
                .await
            {
                Ok(guard) => return Ok(SemaphorePermit::new(slot as u32, guard)),
                // A pause this short may also end before a busy server
                // answered at all; the next look tells.
                Err(e) if e.is_timeout() || no_answer(&e) => {}
                Err(e) => return Err(e),
            }
            pause = (pause * 2).min(self.max_pause);
        }
    }

    /// An acquisition error of one of [`acquire`](Self::acquire)'s steps
    /// (a try of the slots without waiting, a pause of a few ms on a slot,
    /// the turnstile) as one of the semaphore: on its name, with the
    /// caller's `timeout`, so that a failure while connecting does not
    /// read "(no wait)" or name slot 0 when the caller waits for any slot.
    fn on_the_semaphore(&self, e: Error, timeout: Option<Duration>) -> Error {
        match e {
            Error::LockAcquisition(mut a) => {
                a.key.clone_from(&self.name);
                a.timeout = timeout;
                Error::LockAcquisition(a)
            }
            other => other,
        }
    }

    fn timed_out(&self, timeout: Option<Duration>) -> Error {
        LockAcquisitionError::new(self.name.clone(), AcquireFailure::Timeout, timeout).into()
    }
}

/// True when the server did not answer before a deadline.
fn no_answer(e: &Error) -> bool {
    e.as_backend()
        .is_some_and(|b| b.kind() == BackendErrorKind::NoAnswer)
}

impl<L> fmt::Debug for Semaphore<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.permits)
            .finish()
    }
}
