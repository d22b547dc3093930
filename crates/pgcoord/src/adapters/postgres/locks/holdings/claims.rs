//! Grants obtained on a dedicated session (after a wait): recorded
//! unclaimed, counted as held once a waiting task claims them, and what a
//! try-lock waits for while one is unclaimed.

use std::sync::Arc;
use std::time::Instant;

use super::{Entry, Holdings};
use crate::adapters::postgres::locks::held_lock::SessionRef;
use crate::adapters::postgres::locks::hold_token::HoldToken;
use crate::ports::alarm::Alarm;

impl Holdings {
    /// Records a grant obtained on a dedicated session (after a wait),
    /// not yet claimed: it counts as held once a task takes it
    /// ([`claim`](Self::claim)). A wait every task gave up on can still
    /// be granted, and such a grant is never this manager's to report.
    pub(crate) fn grant_direct(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        session: &SessionRef,
        at: Instant,
        loss: Arc<Alarm>,
    ) -> HoldToken {
        let hold = self.hold(session, at, loss);
        let (serial, previous) = {
            let mut state = self.lock();
            let serial = state.serial();
            state.entries.entry(lock_id).or_insert_with(|| Entry {
                key: key.clone(),
                owner: None,
                pending: None,
            });
            let previous = Self::install(&mut state, lock_id, serial, hold, false);
            (serial, previous)
        };
        drop(previous);
        HoldToken::Exclusive(serial)
    }

    /// A task took the waited-for grant `token` of `lock_id`: from now on it
    /// counts as held. No-op if it is gone already (its session ended).
    pub(crate) fn claim(&self, lock_id: i64, token: HoldToken) {
        if self.set_claimed(lock_id, token, true) {
            self.settles.notify_waiters();
        }
    }

    /// Takes back a [`claim`](Self::claim) whose task was gone: the grant
    /// is nobody's again (and on its way back).
    pub(crate) fn unclaim(&self, lock_id: i64, token: HoldToken) {
        self.set_claimed(lock_id, token, false);
    }

    /// Marks the waited-for grant `token` of `lock_id` claimed or not, and
    /// counts it as held or not, if it is still in the book and was the
    /// other way; whether it changed.
    fn set_claimed(&self, lock_id: i64, token: HoldToken, claimed: bool) -> bool {
        let HoldToken::Exclusive(serial) = token else {
            return false;
        };
        let mut state = self.lock();
        let Some(o) = state
            .entries
            .get_mut(&lock_id)
            .and_then(|e| e.owner.as_mut())
        else {
            return false;
        };
        if o.serial != serial || o.hold.unclaimed != claimed {
            return false;
        }
        o.hold.unclaimed = !claimed;
        true
    }

    /// Resolves once `lock_id` has no grant that no task has claimed and
    /// no release under way. A grant nobody claimed is either taken by a
    /// waiting task in a moment, or (its tasks gone) already on its way
    /// back; a release (a guard dropped or released) is one round trip.
    /// A try-lock waits for that instead of losing to a grant nobody owns,
    /// or to a lock this manager has already let go of.
    pub(crate) async fn settled(&self, lock_id: i64) {
        loop {
            let settles = self.settles.notified();
            tokio::pin!(settles);
            settles.as_mut().enable();
            let unsettled = self
                .lock()
                .entries
                .get(&lock_id)
                .and_then(|e| e.owner.as_ref())
                .is_some_and(|o| o.hold.unclaimed || o.hold.releasing);
            if !unsettled {
                return;
            }
            settles.await;
        }
    }
}
