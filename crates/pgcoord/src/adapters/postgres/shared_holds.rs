//! [`SharedHolds`]: the bookkeeping of the manager's shared-mode holds.
//!
//! The [registry](super::registry) keeps at most one local owner per lock
//! id, which is what keeps exclusive locks of one manager apart on the
//! shared sessions. Shared holds are different: many tasks of one manager
//! may hold the same key shared at once, each on a session of its own (a
//! dedicated session), so PostgreSQL itself orders every request of both
//! modes, local ones included. This book tracks them by token; tokens are
//! drawn from a range of their own ([`is_shared_token`]) so that a
//! session's bookkeeping can tell which book a lock belongs to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use super::held_lock::{HeldLock, ReleaseBook, SessionRef};
use super::registry::ReleaseAllItem;

/// Shared-hold tokens are at or above this; the registry's are below.
const FIRST_TOKEN: u64 = 1 << 62;

/// Whether `token` names a shared hold (of [`SharedHolds`]).
pub(crate) fn is_shared_token(token: u64) -> bool {
    token >= FIRST_TOKEN
}

struct Hold {
    lock_id: i64,
    key: Arc<str>,
    releasing: bool,
    session: SessionRef,
    loss: CancellationToken,
    manual: Option<HeldLock>,
}

struct State {
    holds: HashMap<u64, Hold>,
    next_token: u64,
}

pub(crate) struct SharedHolds {
    state: Mutex<State>,
}

impl SharedHolds {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                holds: HashMap::new(),
                next_token: FIRST_TOKEN,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a shared grant on `session`; returns its token.
    pub(crate) fn grant(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        session: &SessionRef,
        loss: &CancellationToken,
    ) -> u64 {
        let mut state = self.lock();
        state.next_token += 1;
        let token = state.next_token;
        state.holds.insert(
            token,
            Hold {
                lock_id,
                key: key.clone(),
                releasing: false,
                session: session.clone(),
                loss: loss.clone(),
                manual: None,
            },
        );
        token
    }

    /// Forgets a hold (released or lost). No-op for an unknown token.
    pub(crate) fn finish(&self, token: u64) {
        let removed = self.lock().holds.remove(&token);
        // Dropped outside the mutex: a manual hold's drop re-enters it.
        drop(removed);
    }

    /// How many shared holds there are now.
    pub(crate) fn held(&self) -> usize {
        self.lock().holds.len()
    }

    /// Whether any shared hold of `lock_id` exists.
    pub(crate) fn is_held(&self, lock_id: i64) -> bool {
        self.lock().holds.values().any(|h| h.lock_id == lock_id)
    }

    /// Takes a manual shared hold of `key` out for release.
    pub(crate) fn take_manual(&self, lock_id: i64, key: &str) -> Option<HeldLock> {
        let mut state = self.lock();
        state
            .holds
            .values_mut()
            .filter(|h| h.lock_id == lock_id && &*h.key == key)
            .find_map(|h| h.manual.take())
    }

    /// Every hold not yet being released, marked releasing; guards' loss
    /// tokens fire (their owner did not ask for the release).
    pub(crate) fn take_all_held(&self) -> Vec<ReleaseAllItem> {
        let mut state = self.lock();
        let mut out = Vec::new();
        for (token, h) in state.holds.iter_mut() {
            if h.releasing {
                continue;
            }
            h.releasing = true;
            let manual = h.manual.take();
            if manual.is_none() {
                h.loss.cancel();
            }
            out.push(ReleaseAllItem {
                lock_id: h.lock_id,
                token: *token,
                session: h.session.clone(),
                manual,
            });
        }
        out
    }

    /// Drops every manual hold (their drop sends the unlocks).
    pub(crate) fn drop_manual_locks(&self) {
        let manual: Vec<HeldLock> = {
            let mut state = self.lock();
            let holds = state.holds.values_mut();
            holds.filter_map(|h| h.manual.take()).collect()
        };
        drop(manual);
    }
}

impl ReleaseBook for SharedHolds {
    fn begin_release(&self, _lock_id: i64, token: u64) -> bool {
        match self.lock().holds.get_mut(&token) {
            Some(h) => {
                h.releasing = true;
                true
            }
            None => false,
        }
    }

    fn finish(&self, _lock_id: i64, token: u64) {
        SharedHolds::finish(self, token)
    }

    fn put_manual(&self, lock: HeldLock) -> Result<(), HeldLock> {
        let mut state = self.lock();
        match state.holds.get_mut(&lock.token()) {
            Some(h) if !h.releasing => {
                h.manual = Some(lock);
                Ok(())
            }
            _ => Err(lock),
        }
    }
}
