//! [`BookBatch`]: the book's mutex taken once for everything one batch
//! answer records (its grants, its failed tries, its unlocks), instead of
//! once per item: 1,024 tasks make batches of hundreds of items, and both
//! worker threads of a small machine want the same mutex.

use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use super::{Hold, Holdings, Reservation, State};
use crate::adapters::postgres::locks::held_lock::SessionRef;
use crate::adapters::postgres::locks::hold_token::HoldToken;
use crate::ports::alarm::Alarm;

/// The book, locked for one batch answer. Whatever the batch removes is
/// dropped, and tasks waiting for an id to settle are told, only once the
/// mutex is let go (a dropped hold may end a session, which re-enters the
/// book). Nothing that can re-enter the book may run while it is alive.
pub(crate) struct BookBatch<'a> {
    book: &'a Holdings,
    state: Option<MutexGuard<'a, State>>,
    removed: &'a mut Removed,
    settles: bool,
}

/// Where a [`BookBatch`] puts the holds it removes until its mutex is let
/// go. Kept by the session from batch to batch, so its room is reused (a
/// `Vec` made per batch was one allocation more per sequential pair).
#[derive(Default)]
pub(crate) struct Removed(Vec<Hold>);

impl Holdings {
    /// Locks the book for the records of one batch answer; what they
    /// remove waits in `removed`.
    pub(crate) fn batch<'a>(&'a self, removed: &'a mut Removed) -> BookBatch<'a> {
        BookBatch {
            book: self,
            state: Some(self.lock()),
            removed,
            settles: false,
        }
    }
}

impl BookBatch<'_> {
    fn state(&mut self) -> &mut State {
        self.state.as_mut().expect("locked until dropped")
    }

    /// [`Holdings::grant_reserved`] within the batch; `res` is spent (its
    /// drop does nothing).
    pub(crate) fn grant_reserved(
        &mut self,
        res: &mut Reservation,
        session: &SessionRef,
        at: Instant,
        loss: Arc<Alarm>,
    ) -> HoldToken {
        let hold = self.book.hold(session, at, loss);
        if let Some(previous) = self.state().grant_reserved(res, hold) {
            self.removed.0.push(previous.hold);
        }
        HoldToken::Exclusive(res.serial)
    }

    /// Gives back the place of a try that was not granted; `res` is spent.
    pub(crate) fn unreserve(&mut self, res: &mut Reservation) {
        res.armed = false;
        let (lock_id, serial) = (res.lock_id, res.serial);
        self.state().unreserve(lock_id, serial);
    }

    /// [`Holdings::finish`] within the batch.
    pub(crate) fn finish(&mut self, lock_id: i64, token: HoldToken) {
        let finished = self.state().finish(lock_id, token);
        self.settles |= finished.settles;
        self.removed.0.extend(finished.hold);
    }
}

impl Drop for BookBatch<'_> {
    fn drop(&mut self) {
        drop(self.state.take());
        self.removed.0.clear();
        if self.settles {
            self.book.settles.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::{Holdings, Removed};
    use crate::adapters::postgres::locks::held_lock::SessionRef;
    use crate::adapters::postgres::locks::hold_token::HoldToken;
    use crate::ports::alarm::Alarm;

    struct NoSession;

    impl crate::adapters::postgres::locks::held_lock::UnlockSink for NoSession {
        fn send_unlock(
            &self,
            _: i64,
            _: HoldToken,
            _: Option<crate::adapters::postgres::locks::held_lock::UnlockReply>,
        ) -> bool {
            false
        }
        fn help(&self) -> Arc<crate::adapters::postgres::locks::co_poll::CoPolled> {
            crate::adapters::postgres::locks::co_poll::CoPolled::new()
        }
        fn send_downgrade(
            &self,
            _: i64,
            _: HoldToken,
            _: crate::adapters::postgres::locks::held_lock::UnlockReply,
        ) -> bool {
            false
        }
        fn has_ended(&self) -> bool {
            false
        }
        fn ended_why(&self) -> Option<&str> {
            None
        }
        fn manager_closed(&self) -> bool {
            false
        }
    }

    #[test]
    fn one_batch_records_grants_gives_back_failed_tries_and_forgets_unlocks() {
        let book = Holdings::new(10);
        let session: SessionRef = Arc::new(NoSession);
        let key: Arc<str> = Arc::from("k");
        let (mut a, mut b) = (book.reserve(1, &key).ok(), book.reserve(2, &key).ok());
        let (a, b) = (a.as_mut().unwrap(), b.as_mut().unwrap());
        let mut removed = Removed::default();
        let token = {
            let mut batch = book.batch(&mut removed);
            let token = batch.grant_reserved(a, &session, Instant::now(), Alarm::new());
            batch.unreserve(b);
            token
        };
        assert!(book.is_held(1) && !book.is_held(2));
        assert_eq!(book.held(), 1);
        // The failed try's place is free again: the id can be reserved.
        assert!(book.reserve(2, &key).is_ok());
        book.batch(&mut removed).finish(1, token);
        assert!(!book.is_held(1));
        assert_eq!(book.held(), 0);
        assert!(book.reserve(1, &key).is_ok());
    }
}
