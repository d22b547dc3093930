//! Places in the budget: a pending try-lock ([`Reservation`]) and a wait
//! on a dedicated session ([`WaitSlot`]), each given back when dropped.

use std::num::NonZeroU64;
use std::sync::Arc;

use super::{Entry, Holdings, ReserveError};

/// A pending try-lock; dropping it un-reserves unless it was granted.
pub(crate) struct Reservation {
    book: Arc<Holdings>,
    pub(super) lock_id: i64,
    pub(super) serial: NonZeroU64,
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
        self.book.lock().unreserve(self.lock_id, self.serial);
    }
}

/// A wait's place in the budget; see [`Holdings::reserve_wait`].
pub(crate) struct WaitSlot {
    book: Arc<Holdings>,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.book.lock().waits -= 1;
    }
}

impl Holdings {
    /// Reserves `lock_id` for a try-lock on a batched session.
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
        let serial = state.serial();
        state.entries.insert(
            lock_id,
            Entry {
                key: key.clone(),
                owner: None,
                pending: Some(serial),
            },
        );
        Ok(Reservation {
            book: self.clone(),
            lock_id,
            serial,
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
        Ok(WaitSlot { book: self.clone() })
    }
}
