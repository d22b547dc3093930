//! [`Recent`]: which keys were found held a moment ago.
//!
//! A task whose try-lock just failed and that then waited for its key is
//! likely to find it held again when it comes back for it a moment later
//! (a key several processes take turns on). Its try then costs a round
//! trip and lets every wait that queued in PostgreSQL meanwhile go first;
//! queueing at once instead takes the key just as fast when it is free (a
//! wait that is not blocked is granted at once) and keeps its turn when it
//! is not. So a key whose try failed within [`WINDOW`] goes straight to
//! its wait line.
//!
//! Only a failed try marks a key, never a wait that skipped its try: a key
//! that is no longer contended is tried again within [`WINDOW`]. The
//! memory is a small lossy table of atomics (a colliding key just
//! overwrites a slot), so asking costs the uncontended path two loads.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How long a failed try sends the key's next acquisitions straight to its
/// wait line.
pub(super) const WINDOW: Duration = Duration::from_millis(10);

const SLOTS: usize = 64;

pub(super) struct Recent {
    since: Instant,
    ids: [AtomicI64; SLOTS],
    /// Nanoseconds after `since` of the slot's last failed try, plus one
    /// (0: never).
    at: [AtomicU64; SLOTS],
}

impl Recent {
    pub(super) fn new() -> Self {
        Self {
            since: Instant::now(),
            ids: std::array::from_fn(|_| AtomicI64::new(0)),
            at: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn slot(lock_id: i64) -> usize {
        (lock_id as u64 % SLOTS as u64) as usize
    }

    fn now(&self) -> u64 {
        (self.since.elapsed().as_nanos() as u64).saturating_add(1)
    }

    /// A try-lock of `lock_id` found it held.
    pub(super) fn held(&self, lock_id: i64) {
        let i = Self::slot(lock_id);
        self.ids[i].store(lock_id, Ordering::Relaxed);
        self.at[i].store(self.now(), Ordering::Relaxed);
    }

    /// Whether a try-lock of `lock_id` found it held within [`WINDOW`].
    pub(super) fn contended(&self, lock_id: i64) -> bool {
        let i = Self::slot(lock_id);
        if self.ids[i].load(Ordering::Relaxed) != lock_id {
            return false;
        }
        let at = self.at[i].load(Ordering::Relaxed);
        at != 0 && self.now().saturating_sub(at) < WINDOW.as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_failed_try_marks_its_key_for_the_window_only() {
        let recent = Recent::new();
        assert!(!recent.contended(7));
        recent.held(7);
        assert!(recent.contended(7));
        // Another key of the same slot takes it over; others are untouched.
        assert!(!recent.contended(8));
        tokio::time::advance(WINDOW).await;
        assert!(!recent.contended(7));
        recent.held(7 + SLOTS as i64);
        assert!(!recent.contended(7));
        assert!(recent.contended(7 + SLOTS as i64));
    }
}
