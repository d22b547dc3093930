//! Places in the budget: a pending try-lock ([`Reservation`]) and a wait
//! on a dedicated session ([`WaitSlot`]), each given back when dropped.

use std::sync::Arc;

use super::{Entry, Registry, ReserveError};

/// A pending try-lock; dropping it un-reserves unless it was granted.
pub(crate) struct Reservation {
    registry: Arc<Registry>,
    pub(super) lock_id: i64,
    pub(super) token: u64,
    pub(super) key: Arc<str>,
    pub(super) armed: bool,
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

impl Registry {
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
}
