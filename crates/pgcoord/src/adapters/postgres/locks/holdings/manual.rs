//! The book's side of a lock's owner: manual locks (kept by the book until
//! `release(key)`), guards' loss signals, and `release_all`.

use std::sync::Arc;

use super::{Hold, Holdings};
use crate::adapters::postgres::locks::held_lock::{HeldLock, SessionRef};
use crate::adapters::postgres::locks::hold_token::HoldToken;

/// A lock taken away by `release_all`: what is needed to unlock it.
pub(crate) struct ReleaseAllItem {
    pub(crate) lock_id: i64,
    pub(crate) token: HoldToken,
    pub(crate) session: SessionRef,
    /// A manual lock, rebuilt: releasing it unlocks it.
    pub(crate) manual: Option<HeldLock>,
}

impl Holdings {
    /// The owner of a manual lock, rebuilt from the book (the book owned it).
    fn rebuild(
        self: &Arc<Self>,
        lock_id: i64,
        token: HoldToken,
        key: &Arc<str>,
        hold: &Hold,
    ) -> HeldLock {
        let book = self.clone();
        let granted_at = self.granted_at(hold);
        HeldLock::new(
            lock_id,
            token,
            key.clone(),
            hold.session.clone(),
            book,
            granted_at,
        )
    }

    /// Takes a granted lock over as a manual lock (no guard: released by
    /// key). Gives it back if its owner no longer holds it.
    ///
    /// The lock's own loss alarm is let go: a manual lock has nobody to
    /// tell, and the alarm would otherwise live as long as the lock.
    pub(crate) fn keep_manual(&self, lock: HeldLock) -> Result<(), HeldLock> {
        let mut state = self.lock();
        match state.hold_mut(lock.lock_id(), lock.token()) {
            Some(hold) if !hold.releasing => {
                hold.manual = true;
                let loss = hold.loss.take();
                drop(state);
                drop(loss);
                lock.disarm();
                Ok(())
            }
            _ => Err(lock),
        }
    }

    /// Takes the manual lock of `key` out for release, the exclusive one
    /// first, else one reader hold.
    pub(crate) fn take_manual(self: &Arc<Self>, lock_id: i64, key: &str) -> Option<HeldLock> {
        let mut state = self.lock();
        if let Some(e) = state.entries.get_mut(&lock_id) {
            let same_key = &*e.key == key;
            if let Some(o) = e.owner.as_mut() {
                if same_key && o.hold.manual && !o.hold.releasing {
                    o.hold.manual = false;
                    let token = HoldToken::Exclusive(o.serial);
                    return Some(self.rebuild(lock_id, token, &e.key, &o.hold));
                }
            }
        }
        let (serial, r) = state.readers.iter_mut().find(|(_, r)| {
            r.lock_id == lock_id && &*r.key == key && r.hold.manual && !r.hold.releasing
        })?;
        r.hold.manual = false;
        Some(self.rebuild(lock_id, HoldToken::Reader(*serial), &r.key, &r.hold))
    }

    /// Everything held in either mode, marked releasing; guards' loss
    /// signals fire (their owner did not ask for the release).
    pub(crate) fn take_all_held(self: &Arc<Self>) -> Vec<ReleaseAllItem> {
        let mut state = self.lock();
        let mut out = Vec::new();
        for (lock_id, e) in state.entries.iter_mut() {
            let Some(o) = e.owner.as_mut() else { continue };
            if o.hold.releasing || o.hold.unclaimed {
                continue;
            }
            let token = HoldToken::Exclusive(o.serial);
            out.push(self.take_one(*lock_id, token, &e.key, &mut o.hold));
        }
        for (serial, r) in state.readers.iter_mut() {
            if r.hold.releasing {
                continue;
            }
            let token = HoldToken::Reader(*serial);
            out.push(self.take_one(r.lock_id, token, &r.key, &mut r.hold));
        }
        out
    }

    fn take_one(
        self: &Arc<Self>,
        lock_id: i64,
        token: HoldToken,
        key: &Arc<str>,
        hold: &mut Hold,
    ) -> ReleaseAllItem {
        let manual = std::mem::take(&mut hold.manual);
        let manual = manual.then(|| self.rebuild(lock_id, token, key, hold));
        hold.releasing = true;
        if let Some(loss) = &hold.loss {
            loss.raise();
        }
        ReleaseAllItem {
            lock_id,
            token,
            session: hold.session.clone(),
            manual,
        }
    }

    /// Drops every manual lock (their drop sends the unlocks). Used when the
    /// manager itself is dropped.
    pub(crate) fn drop_manual_locks(self: &Arc<Self>) {
        let manual: Vec<HeldLock> = {
            let mut state = self.lock();
            let mut out = Vec::new();
            for (lock_id, e) in state.entries.iter_mut() {
                let Some(o) = e.owner.as_mut().filter(|o| o.hold.manual) else {
                    continue;
                };
                o.hold.manual = false;
                let token = HoldToken::Exclusive(o.serial);
                out.push(self.rebuild(*lock_id, token, &e.key, &o.hold));
            }
            for (serial, r) in state.readers.iter_mut().filter(|(_, r)| r.hold.manual) {
                r.hold.manual = false;
                let token = HoldToken::Reader(*serial);
                out.push(self.rebuild(r.lock_id, token, &r.key, &r.hold));
            }
            out
        };
        // Dropped outside the mutex: each drop re-enters the book.
        drop(manual);
    }
}
