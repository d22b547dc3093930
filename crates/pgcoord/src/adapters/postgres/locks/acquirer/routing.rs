//! Which batched session new work goes to (see [`Acquirer::batched_session`]).

use std::sync::atomic::Ordering;

use super::super::session::{self, Kind, SessionHandle};
use super::super::settings::{LIGHT_SESSION_LOCKS, LOCKS_PER_BATCHED_SESSION};
use super::Acquirer;

impl Acquirer {
    /// The batched session new work goes to. The base sessions come
    /// first (each opened when first chosen). Then, while this manager's batched sessions hold
    /// [`LOCKS_PER_BATCHED_SESSION`] locks or more each on average, one more
    /// is opened for it (up to `max_batched_sessions`). Else it goes to the
    /// first open one, while that one holds at most [`LIGHT_SESSION_LOCKS`]
    /// locks and the others none (unless the manager fences); else to the
    /// one holding fewest. Any session will do: no session of this manager
    /// holds a lock id the book has no entry for.
    pub(super) fn batched_session(&self) -> SessionHandle {
        let base = self.ctx.settings.batched_sessions.min(self.batched.len());
        // Slots past the highest ever opened are all free: the first of
        // them is the only one worth a look.
        let upto = (self.opened.load(Ordering::Relaxed) + 1)
            .max(base)
            .min(self.batched.len());
        let (mut first, mut fewest, mut first_free) = (None, None, None);
        let (mut total, mut open, mut others_hold) = (0, 0, false);
        for (i, slot) in self.batched[..upto].iter().enumerate() {
            // Only a look under the slot's mutex (gone again before
            // `open_batched` locks it): the handle chosen is cloned once,
            // at the end.
            let held = {
                let slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                slot.as_ref()
                    .filter(|h| !h.is_dead())
                    .map(SessionHandle::held)
            };
            let held = match held {
                Some(n) => n,
                // A base session counts as open and holding nothing, but is
                // opened only when chosen: a light load never opens the
                // second one, so a manager's first lock takes one server
                // session, and a pooler with one free for it serves it.
                None if i < base => 0,
                None => {
                    first_free.get_or_insert(i);
                    continue;
                }
            };
            total += held;
            open += 1;
            if fewest.is_none_or(|(n, _)| held < n) {
                fewest = Some((held, i));
            }
            match first {
                None => first = Some((held, i)),
                Some(_) => others_hold |= held > 0,
            }
        }
        if let Some(i) = first_free.filter(|_| total >= open * LOCKS_PER_BATCHED_SESSION) {
            return self.open_batched(i);
        }
        // A fenced grant commits a write: there two sessions overlap their
        // commits' flushes, which costs more than the extra statements.
        let concentrate = !self.ctx.settings.fencing && !others_hold;
        let chosen = match (first, fewest) {
            (Some((held, f)), _) if concentrate && held <= LIGHT_SESSION_LOCKS => f,
            (_, Some((_, i))) => i,
            _ => 0,
        };
        self.open_batched(chosen)
    }

    /// The batched session of slot `i`, opened if it is not open.
    pub(super) fn open_batched(&self, i: usize) -> SessionHandle {
        let mut slot = self.batched[i].lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some(h) if !h.is_dead() => h.clone(),
            _ => {
                let h = session::spawn(self.ctx.clone(), Kind::Batched, std::sync::Weak::new());
                *slot = Some(h.clone());
                self.opened.fetch_max(i + 1, Ordering::Relaxed);
                h
            }
        }
    }
}
