//! One key's state in the in-memory manager: who holds it, in which mode,
//! and who waits, in arrival order. Pure bookkeeping: no locking, no
//! channels beyond the waiters' reply senders.
//!
//! The rules follow PostgreSQL's lock manager: a request is granted on
//! arrival only if it is compatible with every holder **and** nobody waits
//! (so a shared request never passes a queued exclusive one); on release
//! the queue is served from the front for as long as its head is
//! compatible with the holders (a run of shared waiters is granted
//! together, an exclusive one waits for every holder to leave).

use std::collections::VecDeque;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::ports::shared_locks::LockMode;

pub(super) struct Holder {
    pub(super) token: u64,
    pub(super) mode: LockMode,
    pub(super) loss: CancellationToken,
}

pub(super) struct Waiter<T> {
    pub(super) token: u64,
    pub(super) key: String,
    pub(super) mode: LockMode,
    pub(super) tx: oneshot::Sender<T>,
}

pub(super) struct Slot<T> {
    pub(super) holders: Vec<Holder>,
    pub(super) waiters: VecDeque<Waiter<T>>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self {
            holders: Vec::new(),
            waiters: VecDeque::new(),
        }
    }
}

impl<T> Slot<T> {
    /// Whether a request in `mode` is compatible with the current holders.
    fn compatible(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::Exclusive => self.holders.is_empty(),
            LockMode::Shared => self.holders.iter().all(|h| h.mode == LockMode::Shared),
        }
    }

    /// Whether a newcomer in `mode` is granted at once: compatible, and no
    /// live waiter ahead of it.
    pub(super) fn admits(&mut self, mode: LockMode) -> bool {
        self.waiters.retain(|w| !w.tx.is_closed());
        self.waiters.is_empty() && self.compatible(mode)
    }

    pub(super) fn holder(&self, token: u64) -> Option<&Holder> {
        self.holders.iter().find(|h| h.token == token)
    }

    pub(super) fn remove_holder(&mut self, token: u64) -> Option<Holder> {
        let i = self.holders.iter().position(|h| h.token == token)?;
        Some(self.holders.swap_remove(i))
    }

    /// The head of the queue, if it can be granted now (departed waiters
    /// are skipped).
    pub(super) fn next_grantable(&mut self) -> Option<Waiter<T>> {
        while let Some(front) = self.waiters.front() {
            if front.tx.is_closed() {
                self.waiters.pop_front();
                continue;
            }
            if !self.compatible(front.mode) {
                return None;
            }
            return self.waiters.pop_front();
        }
        None
    }

    pub(super) fn is_empty(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(token: u64, mode: LockMode) -> Holder {
        Holder {
            token,
            mode,
            loss: CancellationToken::new(),
        }
    }

    fn waiter(slot: &mut Slot<()>, token: u64, mode: LockMode) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        slot.waiters.push_back(Waiter {
            token,
            key: "k".into(),
            mode,
            tx,
        });
        rx
    }

    #[test]
    fn a_reader_does_not_pass_a_queued_writer() {
        let mut slot = Slot::<()>::default();
        slot.holders.push(holder(1, LockMode::Shared));
        assert!(slot.admits(LockMode::Shared), "readers share");
        let _w = waiter(&mut slot, 2, LockMode::Exclusive);
        assert!(
            !slot.admits(LockMode::Shared),
            "a writer waits: readers queue"
        );
        assert!(
            slot.next_grantable().is_none(),
            "the writer waits for the reader"
        );
        slot.remove_holder(1);
        let next = slot.next_grantable().expect("the writer is next");
        assert_eq!((next.token, next.mode), (2, LockMode::Exclusive));
    }

    #[test]
    fn a_run_of_readers_is_served_together_up_to_the_next_writer() {
        let mut slot = Slot::<()>::default();
        slot.holders.push(holder(1, LockMode::Exclusive));
        let _r1 = waiter(&mut slot, 2, LockMode::Shared);
        let _r2 = waiter(&mut slot, 3, LockMode::Shared);
        let _w = waiter(&mut slot, 4, LockMode::Exclusive);
        slot.remove_holder(1);
        let mut granted = Vec::new();
        while let Some(w) = slot.next_grantable() {
            slot.holders.push(holder(w.token, w.mode));
            granted.push(w.token);
        }
        assert_eq!(granted, vec![2, 3]);
        assert_eq!(slot.waiters.len(), 1, "the writer still waits");
    }

    #[test]
    fn departed_waiters_are_skipped() {
        let mut slot = Slot::<()>::default();
        slot.holders.push(holder(1, LockMode::Exclusive));
        drop(waiter(&mut slot, 2, LockMode::Exclusive));
        let _r = waiter(&mut slot, 3, LockMode::Shared);
        slot.remove_holder(1);
        assert_eq!(slot.next_grantable().map(|w| w.token), Some(3));
        assert!(slot.admits(LockMode::Shared));
    }
}
