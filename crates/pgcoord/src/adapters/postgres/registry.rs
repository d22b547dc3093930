//! The manager's exact local bookkeeping of the locks it holds.
//!
//! Each lock id this manager touches has one entry with up to two parts:
//!
//! - an **owner**: the lock is held (or being released) by one local owner,
//!   stamped with a token unique to that ownership;
//! - a **pending** try-lock: a request for the lock id is on its way to the
//!   id's shared session.
//!
//! Removals name their token: a late removal never erases the next owner.
//!
//! A new try-lock is only sent when the entry has neither part: advisory
//! locks are re-entrant per session, so the shared session that might hold
//! the id is never asked for it again. A grant obtained on a dedicated
//! session replaces the owner but leaves a pending try-lock in place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use super::held_lock::{HeldLock, ReleaseBook, SessionRef};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Granted.
    Held,
    /// An unlock is on its way; still held on the server until it completes.
    Releasing,
}

struct Owner {
    token: u64,
    phase: Phase,
    session: SessionRef,
    /// Fires when the lock is lost; a child of the session's own token.
    loss: CancellationToken,
    /// A manual lock is owned by the registry until `release(key)`.
    manual: Option<HeldLock>,
}

struct Entry {
    key: Arc<str>,
    owner: Option<Owner>,
    pending: Option<u64>,
}

#[derive(Default)]
struct State {
    entries: HashMap<i64, Entry>,
    held: usize,
    next_token: u64,
    /// Waits in flight on dedicated sessions ([`WaitSlot`]s): a queued
    /// waiter takes a place in the server's lock table too.
    waits: usize,
}

impl State {
    /// Places used in the budget: locks held, taken or released, and waits.
    fn used(&self) -> usize {
        self.entries.len() + self.waits
    }

    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    /// Removes an entry that has become empty.
    fn tidy(&mut self, lock_id: i64) {
        if matches!(self.entries.get(&lock_id), Some(e) if e.owner.is_none() && e.pending.is_none())
        {
            self.entries.remove(&lock_id);
        }
    }
}

pub(crate) struct Registry {
    state: Mutex<State>,
    budget: usize,
}

/// Why a lock id cannot be reserved.
pub(crate) enum ReserveError {
    /// Another local owner holds, acquires or releases it.
    Busy,
    /// The budget is used up.
    Budget(usize),
}

/// A pending try-lock; dropping it un-reserves unless it was granted.
pub(crate) struct Reservation {
    registry: Arc<Registry>,
    lock_id: i64,
    token: u64,
    key: Arc<str>,
    armed: bool,
}

impl Reservation {
    pub(crate) fn lock_id(&self) -> i64 {
        self.lock_id
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.registry.lock();
        if let Some(e) = state.entries.get_mut(&self.lock_id) {
            if e.pending == Some(self.token) {
                e.pending = None;
            }
        }
        state.tidy(self.lock_id);
    }
}

/// A wait's place in the budget; see [`Registry::reserve_wait`].
pub(crate) struct WaitSlot {
    registry: Arc<Registry>,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.registry.lock().waits -= 1;
    }
}

/// A lock taken away by `release_all`: what is needed to unlock it.
pub(crate) struct ReleaseAllItem {
    pub(crate) lock_id: i64,
    pub(crate) token: u64,
    pub(crate) session: SessionRef,
    pub(crate) manual: Option<HeldLock>,
}

impl Registry {
    pub(crate) fn new(budget: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            budget,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// Reserves `lock_id` for a try-lock on its shared session.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        lock_id: i64,
        key: &Arc<str>,
    ) -> Result<Reservation, ReserveError> {
        let mut state = self.lock();
        if state.entries.contains_key(&lock_id) {
            return Err(ReserveError::Busy);
        }
        if state.used() >= self.budget {
            return Err(ReserveError::Budget(self.budget));
        }
        let token = state.token();
        state.entries.insert(
            lock_id,
            Entry {
                key: key.clone(),
                owner: None,
                pending: Some(token),
            },
        );
        Ok(Reservation {
            registry: self.clone(),
            lock_id,
            token,
            key: key.clone(),
            armed: true,
        })
    }

    /// Takes a place in the budget for a wait on a dedicated session; the
    /// place is given back when the slot is dropped (after the grant has
    /// been recorded, or the wait ended without one).
    pub(crate) fn reserve_wait(self: &Arc<Self>) -> Result<WaitSlot, ReserveError> {
        let mut state = self.lock();
        if state.used() >= self.budget {
            return Err(ReserveError::Budget(self.budget));
        }
        state.waits += 1;
        Ok(WaitSlot {
            registry: self.clone(),
        })
    }

    /// Records the grant of a reserved try-lock; returns its token.
    pub(crate) fn grant_reserved(
        &self,
        mut res: Reservation,
        session: &SessionRef,
        loss: &CancellationToken,
    ) -> u64 {
        res.armed = false;
        let previous = {
            let mut state = self.lock();
            let e = state.entries.entry(res.lock_id).or_insert_with(|| Entry {
                key: res.key.clone(),
                owner: None,
                pending: None,
            });
            if e.pending == Some(res.token) {
                e.pending = None;
            }
            Self::install(&mut state, res.lock_id, res.token, session, loss)
        };
        drop(previous);
        res.token
    }

    /// Records a grant obtained on a dedicated session (after a wait).
    pub(crate) fn grant_direct(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        session: &SessionRef,
        loss: &CancellationToken,
    ) -> u64 {
        let (token, previous) = {
            let mut state = self.lock();
            let token = state.token();
            state.entries.entry(lock_id).or_insert_with(|| Entry {
                key: key.clone(),
                owner: None,
                pending: None,
            });
            (
                token,
                Self::install(&mut state, lock_id, token, session, loss),
            )
        };
        drop(previous);
        token
    }

    /// Makes `token` the owner. The server granted the lock, so a previous
    /// owner has released it: its later removal names its own token and is
    /// ignored, and the lock is not counted twice. Returns the replaced
    /// owner, to be dropped outside the mutex.
    fn install(
        state: &mut State,
        lock_id: i64,
        token: u64,
        session: &SessionRef,
        loss: &CancellationToken,
    ) -> Option<Owner> {
        let e = state.entries.get_mut(&lock_id).expect("entry just ensured");
        let previous = e.owner.replace(Owner {
            token,
            phase: Phase::Held,
            session: session.clone(),
            loss: loss.clone(),
            manual: None,
        });
        if previous.is_none() {
            state.held += 1;
        }
        previous
    }

    /// Marks an owned lock as being released; false if the token no longer owns it.
    fn mark_releasing(&self, lock_id: i64, token: u64) -> bool {
        let mut state = self.lock();
        match state
            .entries
            .get_mut(&lock_id)
            .and_then(|e| e.owner.as_mut())
        {
            Some(o) if o.token == token => {
                o.phase = Phase::Releasing;
                true
            }
            _ => false,
        }
    }

    /// Forgets an owned lock (released or lost). No-op for a stale token.
    pub(crate) fn finish(&self, lock_id: i64, token: u64) {
        let removed = {
            let mut state = self.lock();
            let removed = match state.entries.get_mut(&lock_id) {
                Some(e) if e.owner.as_ref().is_some_and(|o| o.token == token) => e.owner.take(),
                _ => None,
            };
            if removed.is_some() {
                state.held -= 1;
            }
            state.tidy(lock_id);
            removed
        };
        // Dropped outside the mutex: a manual lock's drop re-enters it.
        drop(removed);
    }

    /// Hands a granted lock to the registry as a manual lock.
    pub(crate) fn keep_manual(&self, lock: HeldLock) -> Result<(), HeldLock> {
        let mut state = self.lock();
        match state
            .entries
            .get_mut(&lock.lock_id())
            .and_then(|e| e.owner.as_mut())
        {
            Some(o) if o.token == lock.token() && o.phase == Phase::Held => {
                o.manual = Some(lock);
                Ok(())
            }
            _ => Err(lock),
        }
    }

    /// Takes a manual lock out for release.
    pub(crate) fn take_manual(&self, lock_id: i64, key: &str) -> Option<HeldLock> {
        let mut state = self.lock();
        let e = state.entries.get_mut(&lock_id)?;
        if &*e.key != key {
            return None;
        }
        e.owner.as_mut()?.manual.take()
    }

    /// Whether `lock_id` is held (granted and not yet fully released).
    pub(crate) fn is_held(&self, lock_id: i64) -> bool {
        self.lock()
            .entries
            .get(&lock_id)
            .is_some_and(|e| e.owner.is_some())
    }

    /// How many locks are held.
    pub(crate) fn held(&self) -> usize {
        self.lock().held
    }

    /// Everything held, marked releasing; guards' loss tokens fire (their
    /// owner did not ask for the release).
    pub(crate) fn take_all_held(&self) -> Vec<ReleaseAllItem> {
        let mut state = self.lock();
        let mut out = Vec::new();
        for (lock_id, e) in state.entries.iter_mut() {
            let Some(o) = e.owner.as_mut() else { continue };
            if o.phase != Phase::Held {
                continue;
            }
            o.phase = Phase::Releasing;
            let manual = o.manual.take();
            if manual.is_none() {
                o.loss.cancel();
            }
            out.push(ReleaseAllItem {
                lock_id: *lock_id,
                token: o.token,
                session: o.session.clone(),
                manual,
            });
        }
        out
    }

    /// Drops every manual lock (their drop sends the unlocks). Used when the
    /// manager itself is dropped.
    pub(crate) fn drop_manual_locks(&self) {
        let manual: Vec<HeldLock> = {
            let mut state = self.lock();
            state
                .entries
                .values_mut()
                .filter_map(|e| e.owner.as_mut().and_then(|o| o.manual.take()))
                .collect()
        };
        drop(manual);
    }
}

impl ReleaseBook for Registry {
    fn begin_release(&self, lock_id: i64, token: u64) -> bool {
        self.mark_releasing(lock_id, token)
    }

    fn finish(&self, lock_id: i64, token: u64) {
        Registry::finish(self, lock_id, token)
    }

    fn put_manual(&self, lock: HeldLock) -> Result<(), HeldLock> {
        self.keep_manual(lock)
    }
}
