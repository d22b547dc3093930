//! The buffers a batched session reuses from one statement to the next,
//! and what each request of a batch waits for while its statement runs.

use std::sync::Arc;

use super::super::held_lock::UnlockReply;
use super::super::hold_token::HoldToken;
use super::super::holdings::{Removed, Reservation};
use super::mailbox::{Granted, Op, Reply};
use crate::ports::alarm::Alarm;

pub(super) struct PendingLock {
    pub(super) res: Reservation,
    pub(super) key: std::sync::Arc<str>,
    pub(super) reply: Reply<Option<Granted>>,
    /// Filled in when the answer is recorded (`batch::record`).
    pub(super) loss: Option<Arc<Alarm>>,
    pub(super) token: Option<HoldToken>,
}

pub(super) struct PendingUnlock {
    pub(super) lock_id: i64,
    pub(super) token: HoldToken,
    pub(super) reply: Option<UnlockReply>,
}

/// Buffers reused from batch to batch, so the hot path does not allocate them.
#[derive(Default)]
pub(super) struct BatchBuffers {
    pub(super) ops: Vec<Op>,
    pub(super) locks: Vec<PendingLock>,
    pub(super) unlocks: Vec<PendingUnlock>,
    pub(super) ids: Vec<i64>,
    pub(super) is_lock: Vec<bool>,
    /// `ids` and `is_lock` as the one array the unfenced statement takes.
    pub(super) items: Vec<i64>,
    /// Per item, the answer (`batch::query`): a batch of 1,024 tasks has
    /// about 400, 10 KB, and a new block that large made glibc consolidate
    /// every small chunk freed since, once per batch.
    pub(super) results: Vec<(bool, Option<u64>)>,
    pub(super) removed: Removed,
}

impl BatchBuffers {
    /// Empties the buffers, and gives back memory after an unusually large
    /// batch. 1,024 tasks on one manager make batches of about 400 items:
    /// a smaller bound gave their memory back and took it again on every
    /// batch. Kept, it is at most about 220 KB a session (1,024 requests).
    pub(super) fn reset(&mut self) {
        const KEEP: usize = 1024;
        self.ops.clear();
        self.locks.clear();
        self.unlocks.clear();
        self.ids.clear();
        self.is_lock.clear();
        self.items.clear();
        self.results.clear();
        if self.ids.capacity() > KEEP {
            self.ops.shrink_to(KEEP);
            self.locks.shrink_to(KEEP);
            self.unlocks.shrink_to(KEEP);
            self.ids.shrink_to(KEEP);
            self.is_lock.shrink_to(KEEP);
            self.items.shrink_to(KEEP);
            self.results.shrink_to(KEEP);
        }
    }
}
