//! [`InMemoryLockManager`]: the lock ports for one process, without a database.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

mod held;
mod lock_ports;
mod slot;
mod testing;

use slot::{Holder, Slot, Waiter};

use crate::ports::backend_error::{BackendError, BackendErrorKind};
use crate::ports::error::{AcquireFailure, LockAcquisitionError, Result};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{LockGuard, LockInfo, LockRegistry, LossSignal};
use crate::ports::shared_locks::LockMode;

/// A lock manager for tests: excludes tasks of **one process** only.
///
/// No exclusion between processes, no release when a process dies: it is
/// for testing code written against [`DistributedLock`](crate::DistributedLock) and
/// [`SharedLock`](crate::SharedLock).
/// It shares with `PostgresLockManager` the lock ids, timeout semantics,
/// errors, and the queue order of both modes (first come, first served; a
/// reader never passes a queued writer).
///
/// One difference on drop: a dropped [`LockGuard`](crate::LockGuard) frees
/// its key here at once, while `PostgresLockManager` releases it in the
/// background, so another manager's `try_lock` right after the drop may
/// still find the key held. Code whose next step needs the key free (a
/// test that hands it to another manager) calls
/// [`LockGuard::release`](crate::LockGuard::release)`.await`, which
/// returns once the key is free on either.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use pgcoord::{DistributedLock, InMemoryLockManager};
/// let locks = InMemoryLockManager::new(Some("test-worker".into()));
/// let guard = locks.acquire("cutover:tenant-1", None).await?;
/// assert!(locks.is_held("cutover:tenant-1"));
/// guard.release().await?;
/// assert!(!locks.is_held("cutover:tenant-1"));
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct InMemoryLockManager {
    inner: Arc<Inner>,
}

struct Inner {
    holder_id: Option<Arc<str>>,
    /// Whether exclusive grants carry fencing tokens.
    fencing: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    slots: HashMap<i64, Slot<Held>>,
    /// Manual locks (guards turned `into_manual`) by token, owned
    /// by the manager.
    manual: HashMap<u64, Held>,
    held: usize,
    next_token: u64,
    /// The last fencing token handed out per lock id (never forgotten).
    fences: HashMap<i64, u64>,
}

/// Ownership of one granted lock; dropping it releases the lock.
struct Held {
    inner: Arc<Inner>,
    lock_id: i64,
    token: u64,
    info: LockInfo,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.inner.release_token(self.lock_id, self.token);
    }
}

/// Grants made under the mutex, to be sent to their waiters after it is
/// unlocked (a waiter that left drops its grant, which re-enters the mutex).
type Handoffs = Vec<(oneshot::Sender<Held>, Held)>;

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the mutex was held cannot leave the maps half-updated
        // in a way that matters more than losing the process, so recover.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn holds(&self, lock_id: i64, token: u64) -> bool {
        let state = self.lock();
        let slot = state.slots.get(&lock_id);
        slot.is_some_and(|s| s.holder(token).is_some())
    }

    /// Frees `token`'s hold of `lock_id`; serves the waiters it unblocks.
    fn release_token(self: &Arc<Self>, lock_id: i64, token: u64) {
        let handoffs = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let Some(slot) = state.slots.get_mut(&lock_id) else {
                return;
            };
            if slot.remove_holder(token).is_none() {
                return;
            }
            state.held -= 1;
            self.serve(state, lock_id)
        };
        send(handoffs);
    }

    /// Turns `token`'s exclusive hold into a shared one and serves the
    /// readers queued at the head; false if it no longer holds the lock.
    fn downgrade(self: &Arc<Self>, lock_id: i64, token: u64) -> bool {
        let handoffs = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let Some(slot) = state.slots.get_mut(&lock_id) else {
                return false;
            };
            let Some(h) = slot.holders.iter_mut().find(|h| h.token == token) else {
                return false;
            };
            h.mode = LockMode::Shared;
            self.serve(state, lock_id)
        };
        send(handoffs);
        true
    }

    /// Grants the head of `lock_id`'s queue for as long as it is compatible.
    fn serve(self: &Arc<Self>, state: &mut State, lock_id: i64) -> Handoffs {
        let mut out = Vec::new();
        let Some(slot) = state.slots.get_mut(&lock_id) else {
            return out;
        };
        while let Some(w) = slot.next_grantable() {
            let (held, holder) = self.grant(&mut state.fences, lock_id, &w.key, w.token, w.mode);
            slot.holders.push(holder);
            state.held += 1;
            out.push((w.tx, held));
        }
        if slot.is_empty() {
            state.slots.remove(&lock_id);
        }
        out
    }

    /// Builds the holder of a grant. An exclusive grant's fence is one more
    /// than the key's last; a shared grant has none.
    fn grant(
        self: &Arc<Self>,
        fences: &mut HashMap<i64, u64>,
        lock_id: i64,
        key: &str,
        token: u64,
        mode: LockMode,
    ) -> (Held, Holder) {
        let fence = (self.fencing && mode == LockMode::Exclusive).then(|| {
            let fence = fences.entry(lock_id).or_default();
            *fence += 1;
            *fence
        });
        let info = LockInfo {
            key: key.into(),
            lock_id,
            acquired_at: Utc::now(),
            holder_id: self.holder_id.clone(),
            fence,
            mode,
        };
        let holder = Holder {
            token,
            mode,
            loss: CancellationToken::new(),
        };
        let held = Held {
            inner: self.clone(),
            lock_id,
            token,
            info,
        };
        (held, holder)
    }
}

fn send(handoffs: Handoffs) {
    for (tx, held) in handoffs {
        tracing::debug!(key = %held.info.key, lock_id = held.lock_id, "lock handed to next waiter");
        // A waiter that went away in between drops `held`, which releases
        // again and serves the next one.
        let _ = tx.send(held);
    }
}

impl InMemoryLockManager {
    /// A new, empty manager. `holder_id` is copied into every [`LockInfo`].
    /// Every exclusive grant carries a fencing token (one more than the
    /// key's last), as a `PostgresLockManager` built with fencing does.
    pub fn new(holder_id: Option<String>) -> Self {
        Self::build(holder_id, true)
    }

    /// A manager whose guards carry no fencing token ([`LockGuard::fence`]
    /// is `None`), like a `PostgresLockManager` without fencing: for unit
    /// tests of code that must refuse such a manager (an
    /// [`Election`](crate::coordination::Election) does).
    ///
    /// ```
    /// use pgcoord::coordination::Election;
    /// use pgcoord::{DistributedLock, InMemoryLockManager};
    ///
    /// let plain = InMemoryLockManager::without_fencing(None);
    /// assert!(!plain.fences());
    /// assert!(Election::new(plain, "jobs").is_err());
    /// ```
    pub fn without_fencing(holder_id: Option<String>) -> Self {
        Self::build(holder_id, false)
    }

    fn build(holder_id: Option<String>, fencing: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                holder_id: holder_id.map(Arc::from),
                fencing,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Whether exclusive grants carry fencing tokens.
    pub(crate) fn fencing(&self) -> bool {
        self.inner.fencing
    }

    /// The guard of a grant. A hold already gone (taken by `release_all` or
    /// a simulated loss between the hand-off and now) fails the acquisition,
    /// as the PostgreSQL manager refuses a grant whose session has ended.
    fn guard_for(&self, held: Held, timeout: Option<Duration>) -> Result<LockGuard> {
        let loss = {
            let state = self.inner.lock();
            let slot = state.slots.get(&held.lock_id);
            slot.and_then(|s| s.holder(held.token))
                .map(|h| h.loss.clone())
        };
        let Some(loss) = loss else {
            let key = held.info.key.to_string();
            drop(held);
            let gone = BackendError::new(BackendErrorKind::Closed, "the lock was lost as granted");
            return Err(
                LockAcquisitionError::new(key, AcquireFailure::Backend(gone), timeout).into(),
            );
        };
        let loss = LossSignal::from_token(loss);
        Ok(LockGuard::new(held.info.clone(), loss, Box::new(held)))
    }

    /// Takes the lock now if the queue admits it; otherwise queues a waiter
    /// (unless `queue` is false).
    fn take_or_queue(
        &self,
        lock_id: i64,
        key: &str,
        mode: LockMode,
        queue: bool,
    ) -> std::result::Result<Held, Option<(u64, oneshot::Receiver<Held>)>> {
        let mut guard = self.inner.lock();
        let state = &mut *guard;
        state.next_token += 1;
        let token = state.next_token;
        let slot = state.slots.entry(lock_id).or_default();
        if slot.admits(mode) {
            let (held, holder) = self
                .inner
                .grant(&mut state.fences, lock_id, key, token, mode);
            slot.holders.push(holder);
            state.held += 1;
            return Ok(held);
        }
        if !queue {
            if slot.is_empty() {
                state.slots.remove(&lock_id);
            }
            return Err(None);
        }
        let (tx, rx) = oneshot::channel();
        slot.waiters.push_back(Waiter {
            token,
            key: key.to_owned(),
            mode,
            tx,
        });
        Err(Some((token, rx)))
    }

    /// A waiter that gave up leaves the queue, and whoever it held back
    /// (readers behind a departed writer) is served.
    fn forget_waiter(&self, lock_id: i64, token: u64) {
        let handoffs = {
            let mut guard = self.inner.lock();
            let state = &mut *guard;
            if let Some(slot) = state.slots.get_mut(&lock_id) {
                slot.waiters.retain(|w| w.token != token);
            }
            self.inner.serve(state, lock_id)
        };
        send(handoffs);
    }

    async fn acquire_mode(
        &self,
        key: &str,
        timeout: Option<Duration>,
        mode: LockMode,
    ) -> Result<LockGuard> {
        let lock_id = checked_lock_id(key, timeout)?;
        let queue = timeout != Some(Duration::ZERO);
        let (token, rx) = match self.take_or_queue(lock_id, key, mode, queue) {
            Ok(held) => return self.guard_for(held, timeout),
            Err(None) => {
                return Err(LockAcquisitionError::new(key, AcquireFailure::Timeout, timeout).into())
            }
            Err(Some(w)) => w,
        };
        // Dropped with this future: the waiter leaves the queue.
        let leave = LeaveOnDrop {
            manager: self,
            lock_id,
            token,
        };
        let outcome = match timeout {
            None => rx.await.ok(),
            Some(t) => tokio::time::timeout(t, rx).await.ok().and_then(|r| r.ok()),
        };
        drop(leave);
        match outcome {
            Some(held) => self.guard_for(held, timeout),
            None => Err(LockAcquisitionError::new(key, AcquireFailure::Timeout, timeout).into()),
        }
    }
}

struct LeaveOnDrop<'a> {
    manager: &'a InMemoryLockManager,
    lock_id: i64,
    token: u64,
}

impl Drop for LeaveOnDrop<'_> {
    fn drop(&mut self) {
        self.manager.forget_waiter(self.lock_id, self.token);
    }
}

impl fmt::Debug for InMemoryLockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryLockManager")
            .field("holder_id", &self.inner.holder_id)
            .field("held", &self.held_lock_count())
            .finish()
    }
}
