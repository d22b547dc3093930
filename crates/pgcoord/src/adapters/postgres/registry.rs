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

mod reservation;
pub(crate) use reservation::Reservation;

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
    /// Granted after a wait and not yet taken by a task (see
    /// [`Registry::grant_direct`]): not counted as held.
    unclaimed: bool,
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
    /// Told when an unclaimed grant is claimed or gone (see
    /// [`Registry::settled`]).
    settles: tokio::sync::Notify,
}

/// Why a lock id cannot be reserved.
pub(crate) enum ReserveError {
    /// Another local owner holds, acquires or releases it.
    Busy,
    /// The budget is used up.
    Budget(usize),
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
            settles: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
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
            Self::install(&mut state, res.lock_id, res.token, session, loss, true)
        };
        drop(previous);
        res.token
    }

    /// Records a grant obtained on a dedicated session (after a wait),
    /// not yet claimed: it counts as held once a task takes it
    /// ([`claim`](Self::claim)). A wait every task gave up on can still
    /// be granted, and such a grant is never this manager's to report.
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
                Self::install(&mut state, lock_id, token, session, loss, false),
            )
        };
        drop(previous);
        token
    }

    /// A task took the waited-for grant `token` of `lock_id`: from now on it
    /// counts as held. No-op if it is gone already (its session ended).
    pub(crate) fn claim(&self, lock_id: i64, token: u64) {
        {
            let mut state = self.lock();
            let Some(o) = state
                .entries
                .get_mut(&lock_id)
                .and_then(|e| e.owner.as_mut())
            else {
                return;
            };
            if o.token != token || !o.unclaimed {
                return;
            }
            o.unclaimed = false;
            state.held += 1;
        }
        self.settles.notify_waiters();
    }

    /// Resolves once `lock_id` has no grant that no task has claimed: one
    /// is either taken by a waiting task in a moment, or (its tasks gone)
    /// already on its way back, about a round trip. A try-lock waits for
    /// that instead of losing to a grant nobody owns.
    pub(crate) async fn settled(&self, lock_id: i64) {
        loop {
            let settles = self.settles.notified();
            tokio::pin!(settles);
            settles.as_mut().enable();
            let unclaimed = self
                .lock()
                .entries
                .get(&lock_id)
                .and_then(|e| e.owner.as_ref())
                .is_some_and(|o| o.unclaimed);
            if !unclaimed {
                return;
            }
            settles.await;
        }
    }

    /// Makes `token` the owner, counted as held when `claimed`. The server
    /// granted the lock, so a previous owner has released it: its later
    /// removal names its own token and is ignored, and the lock is not
    /// counted twice. Returns the replaced owner, to be dropped outside the
    /// mutex.
    fn install(
        state: &mut State,
        lock_id: i64,
        token: u64,
        session: &SessionRef,
        loss: &CancellationToken,
        claimed: bool,
    ) -> Option<Owner> {
        let e = state.entries.get_mut(&lock_id).expect("entry just ensured");
        let previous = e.owner.replace(Owner {
            token,
            phase: Phase::Held,
            session: session.clone(),
            loss: loss.clone(),
            manual: None,
            unclaimed: !claimed,
        });
        let was_counted = previous.as_ref().is_some_and(|o| !o.unclaimed);
        state.held = state.held + usize::from(claimed) - usize::from(was_counted);
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
            if removed.as_ref().is_some_and(|o| !o.unclaimed) {
                state.held -= 1;
            }
            state.tidy(lock_id);
            removed
        };
        if removed.as_ref().is_some_and(|o| o.unclaimed) {
            self.settles.notify_waiters();
        }
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

    /// Whether `lock_id` is held (granted and not yet fully released) by
    /// a local owner.
    pub(crate) fn is_held(&self, lock_id: i64) -> bool {
        self.lock()
            .entries
            .get(&lock_id)
            .and_then(|e| e.owner.as_ref())
            .is_some_and(|o| !o.unclaimed)
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
            if o.phase != Phase::Held || o.unclaimed {
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
