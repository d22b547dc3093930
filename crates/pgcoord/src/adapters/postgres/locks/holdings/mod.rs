//! [`Holdings`]: the manager's one book of the locks it holds, in both
//! modes, each ownership named by a [`HoldToken`] that says which part of
//! the book it lives in.
//!
//! - **Exclusive**: each lock id this manager takes exclusively has one
//!   entry with up to two parts: an *owner* (the lock is held, or being
//!   released, by one local owner) and a *pending* try-lock (a request for
//!   the id is on its way to a batched session). A new try-lock is only
//!   sent when the entry has neither part: advisory locks are re-entrant
//!   per session, so a batched session that might hold the id is never
//!   asked for it again. A grant obtained on a dedicated session (after a
//!   wait) replaces the owner but leaves a pending try-lock in place.
//! - **Reader** (shared mode): any number of holds per lock id, each on a
//!   dedicated session of its own, so PostgreSQL itself orders the
//!   requests of both modes, this manager's own included.
//!
//! Removals name their token: a late removal never erases the next owner.
//!
//! What a held lock costs here is kept small: a lock with no guard (a
//! manual lock, released by key) is a flag, its [`HeldLock`] rebuilt when
//! it is released, and the lock's loss alarm (made with its grant, for the
//! guard) is let go once it becomes manual.

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::held_lock::{HeldLock, ReleaseBook, SessionRef};
use super::hold_token::HoldToken;
use super::id_map::IdMap;
use crate::ports::alarm::Alarm;

mod batch;
mod claims;
mod manual;
mod readers;
mod reservation;

pub(crate) use batch::Removed;
pub(crate) use reservation::Reservation;

/// What the book keeps of one hold, in either mode.
struct Hold {
    session: SessionRef,
    /// The guard's loss signal, once a guard is built; a manual lock has
    /// nobody to tell.
    loss: Option<Arc<Alarm>>,
    /// When it was granted, in nanoseconds after the book's `epoch`.
    granted: u64,
    /// An unlock is on its way; still held on the server until it completes.
    releasing: bool,
    /// Kept by the book until `release(key)`: no guard owns it.
    manual: bool,
    /// Exclusive owners only: granted after a wait and not yet taken by a
    /// task ([`Holdings::grant_direct`]), so not counted as held. Kept here
    /// rather than in [`Owner`], in the padding after the flags above: it
    /// keeps the book's bucket 8 bytes smaller.
    unclaimed: bool,
}

/// The exclusive owner of a lock id.
struct Owner {
    serial: NonZeroU64,
    hold: Hold,
}

impl Owner {
    /// Held: claimed by a task, its session not ended.
    fn is_live(&self) -> bool {
        !self.hold.unclaimed && !self.hold.session.has_ended()
    }
}

struct Entry {
    key: Arc<str>,
    owner: Option<Owner>,
    pending: Option<NonZeroU64>,
}

/// One shared (reader) hold.
struct Reader {
    lock_id: i64,
    key: Arc<str>,
    hold: Hold,
}

#[derive(Default)]
struct State {
    entries: IdMap<i64, Entry>,
    readers: IdMap<NonZeroU64, Reader>,
    next_serial: u64,
    /// Waits in flight on dedicated sessions ([`WaitSlot`]s): a queued
    /// waiter takes a place in the server's lock table too.
    waits: usize,
}

impl State {
    /// Places used in the budget: exclusive locks held, taken or released,
    /// and waits.
    fn used(&self) -> usize {
        self.entries.len() + self.waits
    }

    fn serial(&mut self) -> NonZeroU64 {
        self.next_serial += 1;
        NonZeroU64::new(self.next_serial).expect("a serial after an increment is never 0")
    }

    /// Removes an exclusive entry that has become empty.
    fn tidy(&mut self, lock_id: i64) {
        if matches!(self.entries.get(&lock_id), Some(e) if e.owner.is_none() && e.pending.is_none())
        {
            self.entries.remove(&lock_id);
        }
    }

    /// The hold `token` names, if it is still in the book.
    fn hold_mut(&mut self, lock_id: i64, token: HoldToken) -> Option<&mut Hold> {
        match token {
            HoldToken::Exclusive(serial) => self
                .entries
                .get_mut(&lock_id)
                .and_then(|e| e.owner.as_mut())
                .filter(|o| o.serial == serial)
                .map(|o| &mut o.hold),
            HoldToken::Reader(serial) => self.readers.get_mut(&serial).map(|r| &mut r.hold),
        }
    }

    /// Makes the reserved try-lock `res` the owner of its id; returns the
    /// owner it replaced, to be dropped outside the mutex.
    fn grant_reserved(&mut self, res: &mut Reservation, hold: Hold) -> Option<Owner> {
        res.armed = false;
        let e = self.entries.entry(res.lock_id).or_insert_with(|| Entry {
            key: res.key.clone(),
            owner: None,
            pending: None,
        });
        if e.pending == Some(res.serial) {
            e.pending = None;
        }
        Holdings::install(self, res.lock_id, res.serial, hold, true)
    }

    /// Gives back the place of a pending try-lock that was not granted.
    fn unreserve(&mut self, lock_id: i64, serial: NonZeroU64) {
        if let Some(e) = self.entries.get_mut(&lock_id) {
            if e.pending == Some(serial) {
                e.pending = None;
            }
        }
        self.tidy(lock_id);
    }

    /// Removes the hold `token` names, if it is still in the book.
    fn finish(&mut self, lock_id: i64, token: HoldToken) -> Finished {
        let serial = match token {
            HoldToken::Exclusive(serial) => serial,
            HoldToken::Reader(serial) => {
                let hold = self.readers.remove(&serial).map(|r| r.hold);
                return Finished {
                    hold,
                    settles: false,
                };
            }
        };
        let removed = match self.entries.get_mut(&lock_id) {
            Some(e) if e.owner.as_ref().is_some_and(|o| o.serial == serial) => e.owner.take(),
            _ => None,
        };
        // A try-lock may be waiting for this grant nobody claimed, or for
        // this release, to settle (`Holdings::settled`).
        let settles = removed
            .as_ref()
            .is_some_and(|o| o.hold.unclaimed || o.hold.releasing);
        self.tidy(lock_id);
        Finished {
            hold: removed.map(|o| o.hold),
            settles,
        }
    }
}

/// What [`State::finish`] removed: the hold, to be dropped outside the
/// mutex, and whether it was an unclaimed grant (tasks waiting for the id
/// to settle are then told).
struct Finished {
    hold: Option<Hold>,
    settles: bool,
}

pub(crate) struct Holdings {
    state: Mutex<State>,
    budget: usize,
    /// Told when an unclaimed grant is claimed or gone (see
    /// [`Holdings::settled`]).
    settles: tokio::sync::Notify,
    /// What `Hold::granted` counts from.
    epoch: Instant,
}

/// Why a lock id cannot be reserved.
pub(crate) enum ReserveError {
    /// Another local owner holds, acquires or releases it.
    Busy,
    /// The budget is used up.
    Budget(usize),
}

impl Holdings {
    pub(crate) fn new(budget: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            budget,
            settles: tokio::sync::Notify::new(),
            epoch: Instant::now(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// A new hold of `session`, granted `at`, whose guard will watch `loss`.
    fn hold(&self, session: &SessionRef, at: Instant, loss: Arc<Alarm>) -> Hold {
        Hold {
            session: session.clone(),
            loss: Some(loss),
            granted: at.saturating_duration_since(self.epoch).as_nanos() as u64,
            releasing: false,
            manual: false,
            unclaimed: false,
        }
    }

    fn granted_at(&self, hold: &Hold) -> Instant {
        self.epoch + Duration::from_nanos(hold.granted)
    }

    /// Records the grant of a reserved try-lock, made `at`, whose guard
    /// will watch `loss` (raised if `release_all` takes it); returns its
    /// token. (The grants of one batch answer go through [`Holdings::batch`].)
    pub(crate) fn grant_reserved(
        &self,
        mut res: Reservation,
        session: &SessionRef,
        at: Instant,
        loss: Arc<Alarm>,
    ) -> HoldToken {
        let hold = self.hold(session, at, loss);
        let previous = self.lock().grant_reserved(&mut res, hold);
        drop(previous);
        HoldToken::Exclusive(res.serial)
    }

    /// Makes `serial` the exclusive owner, counted as held when `claimed`.
    /// The server granted the lock, so a previous owner has released it:
    /// its later removal names its own token and is ignored. Returns the replaced owner, to be dropped
    /// outside the mutex.
    fn install(
        state: &mut State,
        lock_id: i64,
        serial: NonZeroU64,
        mut hold: Hold,
        claimed: bool,
    ) -> Option<Owner> {
        let e = state.entries.get_mut(&lock_id).expect("entry just ensured");
        hold.unclaimed = !claimed;
        e.owner.replace(Owner { serial, hold })
    }

    /// Forgets a hold (released or lost). No-op for a stale token.
    pub(crate) fn finish(&self, lock_id: i64, token: HoldToken) {
        let finished = self.lock().finish(lock_id, token);
        if finished.settles {
            self.settles.notify_waiters();
        }
        drop(finished);
    }

    /// Whether `lock_id` is held (granted and not yet fully released) by
    /// a local owner, in either mode. A hold whose session has ended is
    /// not, even in the moment before the session's actor forgets it: its
    /// loss signal has fired already.
    pub(crate) fn is_held(&self, lock_id: i64) -> bool {
        let state = self.lock();
        let exclusive = state
            .entries
            .get(&lock_id)
            .and_then(|e| e.owner.as_ref())
            .is_some_and(Owner::is_live);
        exclusive
            || state
                .readers
                .values()
                .any(|r| r.lock_id == lock_id && !r.hold.session.has_ended())
    }

    /// How many locks are held, in either mode (each reader hold counts):
    /// as for [`is_held`](Self::is_held), a lock whose session has ended
    /// is not held any more, though its guard may still be alive.
    pub(crate) fn held(&self) -> usize {
        let state = self.lock();
        let exclusive = state.entries.values().filter_map(|e| e.owner.as_ref());
        let readers = state.readers.values();
        exclusive.filter(|o| o.is_live()).count()
            + readers.filter(|r| !r.hold.session.has_ended()).count()
    }
}

impl ReleaseBook for Holdings {
    fn begin_release(&self, lock_id: i64, token: HoldToken) -> bool {
        match self.lock().hold_mut(lock_id, token) {
            Some(hold) => {
                hold.releasing = true;
                true
            }
            None => false,
        }
    }

    fn finish(&self, lock_id: i64, token: HoldToken) {
        Holdings::finish(self, lock_id, token)
    }

    fn put_manual(&self, lock: HeldLock) -> Result<(), HeldLock> {
        self.keep_manual(lock)
    }
}

#[cfg(test)]
mod tests {
    /// A held lock's bucket in the book: part of the client memory per held
    /// lock the bench reports (10,000 locks sit in 16,384 buckets).
    #[test]
    fn an_exclusive_entry_stays_within_80_bytes() {
        assert!(std::mem::size_of::<(i64, super::Entry)>() <= 80);
    }
}
