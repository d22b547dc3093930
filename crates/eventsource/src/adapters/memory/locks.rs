//! [`InMemoryLockManager`]: the lock ports for one process, without a database.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

mod testing;

use crate::ports::error::{
    AcquireFailure, LockAcquisitionError, LockLostError, LockNotHeldError, Result,
};
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{
    BoxFuture, DistributedLock, GuardBackend, LockGuard, LockInfo, LockRegistry, LossSignal,
};

/// A lock manager for tests: excludes tasks of **one process** only.
///
/// No exclusion between processes, no release when a process dies: it is
/// for testing code written against [`DistributedLock`]. It shares with
/// `PostgresLockManager` the lock ids, timeout semantics, errors and FIFO.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use eventsource::{DistributedLock, InMemoryLockManager};
/// let locks = InMemoryLockManager::new(Some("test-worker".into()));
/// let guard = locks.acquire("cutover:tenant-1", None).await?;
/// assert!(locks.is_held("cutover:tenant-1"));
/// guard.release().await?;
/// assert!(!locks.is_held("cutover:tenant-1"));
/// # Ok::<(), eventsource::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct InMemoryLockManager {
    inner: Arc<Inner>,
}

struct Inner {
    holder_id: Option<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    slots: HashMap<i64, Slot>,
    /// Manual locks (from `try_acquire` or `into_manual`), owned by the manager.
    manual: HashMap<i64, Held>,
    held: usize,
    next_token: u64,
    /// The last fencing token handed out per lock id (never forgotten).
    fences: HashMap<i64, u64>,
}

struct Slot {
    holder: Option<Holder>,
    waiters: VecDeque<Waiter>,
}

struct Holder {
    token: u64,
    key: String,
    loss: CancellationToken,
}

struct Waiter {
    token: u64,
    tx: oneshot::Sender<Held>,
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

impl GuardBackend for Held {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        let lost = {
            let state = self.inner.lock();
            !matches!(
                state.slots.get(&self.lock_id).and_then(|s| s.holder.as_ref()),
                Some(h) if h.token == self.token
            )
        };
        let key = self.info.key.clone();
        drop(self);
        Box::pin(async move {
            if lost {
                Err(LockLostError {
                    key,
                    reason: "released by release_all or a simulated loss".into(),
                }
                .into())
            } else {
                Ok(())
            }
        })
    }

    fn into_manual(self: Box<Self>) {
        let inner = self.inner.clone();
        let mut state = inner.lock();
        state.manual.insert(self.lock_id, *self);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the mutex was held cannot leave the maps half-updated
        // in a way that matters more than losing the process, so recover.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Frees `lock_id` if `token` holds it; hands it to the first live waiter.
    fn release_token(self: &Arc<Self>, lock_id: i64, token: u64) {
        let handed = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let Some(slot) = state.slots.get_mut(&lock_id) else {
                return;
            };
            match &slot.holder {
                Some(h) if h.token == token => {}
                _ => return,
            }
            let key = slot.holder.take().map(|h| h.key).unwrap_or_default();
            let next = self.next_holder(slot, &mut state.fences, lock_id, &key);
            if slot.holder.is_none() {
                state.held -= 1;
                if slot.waiters.is_empty() {
                    state.slots.remove(&lock_id);
                }
            }
            next
        };
        if let Some((tx, held)) = handed {
            tracing::debug!(key = %held.info.key, lock_id, "lock handed to next waiter");
            // A waiter that went away in between drops `held`, which
            // releases again and serves the next one.
            let _ = tx.send(held);
        }
    }

    /// Makes the first waiter whose future is still alive the holder.
    fn next_holder(
        self: &Arc<Self>,
        slot: &mut Slot,
        fences: &mut HashMap<i64, u64>,
        lock_id: i64,
        key: &str,
    ) -> Option<(oneshot::Sender<Held>, Held)> {
        while let Some(w) = slot.waiters.pop_front() {
            if w.tx.is_closed() {
                continue;
            }
            let (held, holder) = self.grant(fences, lock_id, key, w.token);
            slot.holder = Some(holder);
            return Some((w.tx, held));
        }
        None
    }

    /// Builds the holder of a grant; its fence is one more than the key's last.
    fn grant(
        self: &Arc<Self>,
        fences: &mut HashMap<i64, u64>,
        lock_id: i64,
        key: &str,
        token: u64,
    ) -> (Held, Holder) {
        let fence = fences.entry(lock_id).or_default();
        *fence += 1;
        let info = LockInfo {
            key: key.to_owned(),
            lock_id,
            acquired_at: Utc::now(),
            holder_id: self.holder_id.clone(),
            fence: Some(*fence),
        };
        let holder = Holder {
            token,
            key: key.to_owned(),
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

impl InMemoryLockManager {
    /// A new, empty manager. `holder_id` is copied into every [`LockInfo`].
    pub fn new(holder_id: Option<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                holder_id,
                state: Mutex::new(State::default()),
            }),
        }
    }

    fn guard_for(&self, held: Held) -> LockGuard {
        let loss = {
            let state = self.inner.lock();
            state
                .slots
                .get(&held.lock_id)
                .and_then(|s| s.holder.as_ref())
                .map(|h| h.loss.clone())
                .unwrap_or_default()
        };
        LockGuard::new(
            held.info.clone(),
            LossSignal::from_token(loss),
            Box::new(held),
        )
    }

    /// Takes the lock now if it is free; otherwise queues a waiter (unless `queue` is false).
    fn take_or_queue(
        &self,
        lock_id: i64,
        key: &str,
        queue: bool,
    ) -> std::result::Result<Held, Option<(u64, oneshot::Receiver<Held>)>> {
        let mut guard = self.inner.lock();
        let state = &mut *guard;
        state.next_token += 1;
        let token = state.next_token;
        let slot = state.slots.entry(lock_id).or_insert_with(|| Slot {
            holder: None,
            waiters: VecDeque::new(),
        });
        if slot.holder.is_none() {
            let (held, holder) = self.inner.grant(&mut state.fences, lock_id, key, token);
            slot.holder = Some(holder);
            state.held += 1;
            return Ok(held);
        }
        if !queue {
            return Err(None);
        }
        let (tx, rx) = oneshot::channel();
        slot.waiters.push_back(Waiter { token, tx });
        Err(Some((token, rx)))
    }

    fn forget_waiter(&self, lock_id: i64, token: u64) {
        let mut state = self.inner.lock();
        if let Some(slot) = state.slots.get_mut(&lock_id) {
            slot.waiters.retain(|w| w.token != token);
        }
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

impl DistributedLock for InMemoryLockManager {
    /// Acquires `key`, queueing behind earlier waiters (first come, first served).
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped (a lock handed to a dropped waiter goes to
    /// the next one); not cancel safe: the dropped wait loses its place.
    async fn acquire(&self, key: &str, timeout: Option<Duration>) -> Result<LockGuard> {
        let lock_id = checked_lock_id(key, timeout)?;
        let queue = timeout != Some(Duration::ZERO);
        let (token, rx) = match self.take_or_queue(lock_id, key, queue) {
            Ok(held) => return Ok(self.guard_for(held)),
            Err(None) => {
                return Err(LockAcquisitionError::new(key, AcquireFailure::Timeout, timeout).into())
            }
            Err(Some(w)) => w,
        };
        let outcome = match timeout {
            None => rx.await.ok(),
            Some(t) => tokio::time::timeout(t, rx).await.ok().and_then(|r| r.ok()),
        };
        match outcome {
            Some(held) => Ok(self.guard_for(held)),
            None => {
                self.forget_waiter(lock_id, token);
                Err(LockAcquisitionError::new(key, AcquireFailure::Timeout, timeout).into())
            }
        }
    }

    /// # Cancel safety
    ///
    /// Cancel safe: the call completes without awaiting.
    async fn try_acquire(&self, key: &str) -> Result<Option<LockInfo>> {
        let lock_id = checked_lock_id(key, Some(Duration::ZERO))?;
        match self.take_or_queue(lock_id, key, false) {
            Ok(held) => {
                let info = held.info.clone();
                Box::new(held).into_manual();
                Ok(Some(info))
            }
            Err(_) => Ok(None),
        }
    }

    /// # Cancel safety
    ///
    /// The release happens when this is called; a dropped future loses only the outcome.
    fn release(&self, key: &str) -> impl std::future::Future<Output = Result<()>> + Send {
        let lock_id = crate::lock_id_for_key(key);
        let held = self.inner.lock().manual.remove(&lock_id);
        let outcome = match held {
            Some(h) => {
                drop(h);
                Ok(())
            }
            None => Err(LockNotHeldError {
                key: key.to_owned(),
            }
            .into()),
        };
        std::future::ready(outcome)
    }

    fn is_held(&self, key: &str) -> bool {
        let lock_id = crate::lock_id_for_key(key);
        let state = self.inner.lock();
        state
            .slots
            .get(&lock_id)
            .is_some_and(|s| s.holder.is_some())
    }
}

impl LockRegistry for InMemoryLockManager {
    /// Releases every held lock; guards still alive observe a loss.
    ///
    /// # Cancel safety
    ///
    /// The locks are released when this is called.
    fn release_all(&self) -> impl std::future::Future<Output = Result<usize>> + Send {
        std::future::ready(self.release_all_now())
    }

    fn held_lock_count(&self) -> usize {
        self.inner.lock().held
    }
}

impl InMemoryLockManager {
    fn release_all_now(&self) -> Result<usize> {
        let (holders, manual) = {
            let mut state = self.inner.lock();
            let manual: Vec<Held> = state.manual.drain().map(|(_, h)| h).collect();
            let holders: Vec<(i64, u64, CancellationToken)> = state
                .slots
                .iter()
                .filter_map(|(id, s)| s.holder.as_ref().map(|h| (*id, h.token, h.loss.clone())))
                .collect();
            (holders, manual)
        };
        let manual_tokens: Vec<u64> = manual.iter().map(|h| h.token).collect();
        let count = holders.len();
        drop(manual);
        for (lock_id, token, loss) in holders {
            if !manual_tokens.contains(&token) {
                loss.cancel();
            }
            self.inner.release_token(lock_id, token);
        }
        Ok(count)
    }
}
