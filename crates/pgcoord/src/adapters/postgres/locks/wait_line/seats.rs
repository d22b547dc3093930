//! [`Seats`]: one dedicated session per contended key.
//!
//! A key's wait line sends its waits to a dedicated session, and the
//! session that was granted the key keeps it until its holder lets go.
//! The line's next wait goes out only once that session is parked again
//! (its unlock answered), and then finds it idle: a manager spends one
//! session per contended key, however many of its tasks wait.
//!
//! Waiting for the unlock is also what makes processes take turns. A line
//! that queued its next wait at the grant (with a second session) was
//! ahead, in PostgreSQL's queue, of another process that was releasing the
//! key at that moment and queued again right after: that process then got
//! one grant in three instead of one in two. Now every other process that
//! queued while this manager held the key is served before the line's next
//! task. The price is one round trip on a hand-over between two tasks of
//! the same manager (the unlock's answer, then the wait).
//!
//! The seat outlives a line: a session can still hold a grant of a line
//! that ended, and the key's next line must wait for it.

use super::super::id_map::IdMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;

/// Dedicated sessions a key's wait lines may use at once.
pub(super) const SEATS_PER_KEY: usize = 1;

/// The seats of every key with a line, or with a session still in one.
#[derive(Default)]
pub(super) struct Seats {
    keys: Mutex<IdMap<i64, Weak<Semaphore>>>,
}

impl Seats {
    /// The seats of `lock_id`: the ones in use if any session still holds
    /// one, else new ones.
    pub(super) fn of(&self, lock_id: i64) -> Arc<Semaphore> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seats) = keys.get(&lock_id).and_then(Weak::upgrade) {
            return seats;
        }
        // Forget keys whose seats are all gone, now and then (amortised:
        // only when the map has doubled since the last sweep).
        if keys.len() >= 64 && keys.len().is_power_of_two() {
            keys.retain(|_, w| w.strong_count() > 0);
        }
        let seats = Arc::new(Semaphore::new(SEATS_PER_KEY));
        keys.insert(lock_id, Arc::downgrade(&seats));
        seats
    }

    /// A line of `lock_id` ended: its seats go if no session holds one.
    pub(super) fn line_ended(&self, lock_id: i64) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if keys.get(&lock_id).is_some_and(|w| w.strong_count() == 0) {
            keys.remove(&lock_id);
        }
    }

    /// How many keys have seats now (for tests).
    #[cfg(test)]
    pub(super) fn keys(&self) -> usize {
        let keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.values().filter(|w| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_keeps_its_seats_while_a_session_holds_one() {
        let seats = Seats::default();
        let first = seats.of(7);
        let held = first.clone().try_acquire_owned().unwrap();
        drop(first);
        seats.line_ended(7);
        // The next line of the key counts the seat still held.
        let second = seats.of(7);
        assert_eq!(second.available_permits(), 0);
        drop(held);
        drop(second);
        seats.line_ended(7);
        assert_eq!(seats.keys(), 0);
        assert_eq!(seats.of(7).available_permits(), SEATS_PER_KEY);
    }
}
