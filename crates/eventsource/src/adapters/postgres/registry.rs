//! The manager's exact local bookkeeping of the locks it holds.
//!
//! Every lock id this manager holds, is acquiring on a shared session, or is
//! releasing has one entry, stamped with a token unique to that ownership.
//! Removals name the token, so a late removal by a previous owner never
//! erases the entry of the next one: this is what keeps `is_held` and
//! `held_lock_count` exact when tasks of one manager hand a key over.
//!
//! An entry in any phase also keeps a second local task off that lock id on
//! the shared sessions: advisory locks are re-entrant per session, so two
//! local owners on one session would both "win".

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use super::held::HeldLock;
use super::session::SessionHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A try-lock for it is on its way to a shared session.
    Pending,
    /// Granted.
    Held,
    /// An unlock is on its way; still held on the server until it completes.
    Releasing,
}

pub(crate) struct Entry {
    token: u64,
    phase: Phase,
    key: Arc<str>,
    /// Where it is held, once granted.
    session: Option<SessionHandle>,
    /// Fires when the lock is lost; a child of the session's own token.
    loss: Option<CancellationToken>,
    /// A manual lock is owned by the registry until `release(key)`.
    manual: Option<HeldLock>,
}

#[derive(Default)]
struct State {
    entries: HashMap<i64, Entry>,
    held: usize,
    next_token: u64,
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

/// A pending entry; dropping it un-reserves unless it was granted.
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
        if matches!(state.entries.get(&self.lock_id), Some(e) if e.token == self.token && e.phase == Phase::Pending)
        {
            state.entries.remove(&self.lock_id);
        }
    }
}

/// What every release-all victim needs.
pub(crate) struct Victim {
    pub(crate) lock_id: i64,
    pub(crate) token: u64,
    pub(crate) session: Option<SessionHandle>,
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

    /// Reserves `lock_id` for a try-lock on a shared session.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        lock_id: i64,
        key: &Arc<str>,
    ) -> Result<Reservation, ReserveError> {
        let mut state = self.lock();
        if state.entries.contains_key(&lock_id) {
            return Err(ReserveError::Busy);
        }
        if state.entries.len() >= self.budget {
            return Err(ReserveError::Budget(self.budget));
        }
        state.next_token += 1;
        let token = state.next_token;
        state.entries.insert(
            lock_id,
            Entry {
                token,
                phase: Phase::Pending,
                key: key.clone(),
                session: None,
                loss: None,
                manual: None,
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

    /// Whether one more lock fits in the budget (checked before a wait).
    pub(crate) fn has_room(&self) -> bool {
        self.lock().entries.len() < self.budget
    }

    /// Records a grant of a reserved lock id; returns its token.
    pub(crate) fn grant_reserved(
        &self,
        mut res: Reservation,
        session: &SessionHandle,
        loss: &CancellationToken,
    ) -> u64 {
        let token = res.token;
        let mut state = self.lock();
        let entry = state.entries.entry(res.lock_id).or_insert_with(|| Entry {
            token,
            phase: Phase::Pending,
            key: res.key.clone(),
            session: None,
            loss: None,
            manual: None,
        });
        // Only this reservation can own a pending entry with its token; an
        // entry replaced meanwhile (release_all never touches pending ones)
        // would be a bug, so overwrite to stay truthful about the server.
        entry.token = token;
        entry.phase = Phase::Held;
        entry.session = Some(session.clone());
        entry.loss = Some(loss.clone());
        state.held += 1;
        drop(state);
        res.armed = false;
        token
    }

    /// Records a grant obtained on a dedicated session (after a wait). A
    /// previous owner's entry that was not yet removed is replaced: the
    /// server granted us the lock, so that owner has released it.
    pub(crate) fn grant_direct(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        session: &SessionHandle,
        loss: &CancellationToken,
    ) -> u64 {
        let mut state = self.lock();
        state.next_token += 1;
        let token = state.next_token;
        let previous = state.entries.insert(
            lock_id,
            Entry {
                token,
                phase: Phase::Held,
                key: key.clone(),
                session: Some(session.clone()),
                loss: Some(loss.clone()),
                manual: None,
            },
        );
        match &previous {
            Some(p) if p.phase != Phase::Pending => {}
            _ => state.held += 1,
        }
        drop(state);
        drop(previous);
        token
    }

    /// Marks an owned lock as being released; false if the token no longer owns it.
    pub(crate) fn begin_release(&self, lock_id: i64, token: u64) -> bool {
        let mut state = self.lock();
        match state.entries.get_mut(&lock_id) {
            Some(e) if e.token == token && e.phase != Phase::Pending => {
                e.phase = Phase::Releasing;
                true
            }
            _ => false,
        }
    }

    /// Forgets an owned lock (released or lost). No-op for a stale token.
    pub(crate) fn finish(&self, lock_id: i64, token: u64) {
        let removed = {
            let mut state = self.lock();
            match state.entries.get(&lock_id) {
                Some(e) if e.token == token => {
                    let e = state.entries.remove(&lock_id);
                    if e.as_ref().is_some_and(|e| e.phase != Phase::Pending) {
                        state.held -= 1;
                    }
                    e
                }
                _ => None,
            }
        };
        // Dropped outside the mutex: a manual lock's drop re-enters it.
        drop(removed);
    }

    /// Hands a granted lock to the registry as a manual lock.
    pub(crate) fn put_manual(&self, lock: HeldLock) -> Result<(), HeldLock> {
        let mut state = self.lock();
        match state.entries.get_mut(&lock.lock_id()) {
            Some(e) if e.token == lock.token() && e.phase == Phase::Held => {
                e.manual = Some(lock);
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
        e.manual.take()
    }

    /// Whether `lock_id` is held (granted and not yet fully released).
    pub(crate) fn is_held(&self, lock_id: i64) -> bool {
        self.lock()
            .entries
            .get(&lock_id)
            .is_some_and(|e| e.phase != Phase::Pending)
    }

    /// How many locks are held.
    pub(crate) fn held(&self) -> usize {
        self.lock().held
    }

    /// Everything held, marked releasing; guards' loss tokens fire (their
    /// owner did not ask for the release).
    pub(crate) fn take_all_held(&self) -> Vec<Victim> {
        let mut state = self.lock();
        let mut out = Vec::new();
        for (lock_id, e) in state.entries.iter_mut() {
            if e.phase != Phase::Held {
                continue;
            }
            e.phase = Phase::Releasing;
            let manual = e.manual.take();
            if manual.is_none() {
                if let Some(loss) = &e.loss {
                    loss.cancel();
                }
            }
            out.push(Victim {
                lock_id: *lock_id,
                token: e.token,
                session: e.session.clone(),
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
                .filter_map(|e| e.manual.take())
                .collect()
        };
        drop(manual);
    }
}
