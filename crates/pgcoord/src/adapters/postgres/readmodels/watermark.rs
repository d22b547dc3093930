//! The position below which an event table is final: no transaction still
//! running can add a row there.
//!
//! A row's position comes from a sequence, taken by its transaction after
//! that transaction has its transaction id (the table's position default
//! makes sure of it). So when the sequence had handed out `hi` before a
//! transaction id `x` was assigned, every transaction holding a position
//! up to `hi` has an id below `x`; once the oldest running transaction id
//! (`pg_snapshot_xmin` of a fresh snapshot) is above `x`, all of them have
//! committed or rolled back, and positions up to `hi` are final. Pure
//! bookkeeping here; the statements are the event table's.

use std::collections::VecDeque;

/// Candidates kept at most; beyond that new ones wait for room (the
/// watermark then moves in larger steps, never wrongly).
const MAX_PENDING: usize = 64;

/// The final position, and candidates waiting for their transactions.
#[derive(Debug, Default)]
pub(crate) struct Watermark {
    safe: i64,
    pending: VecDeque<Candidate>,
    /// Reads in a row that found positions held back by running
    /// transactions (for the feed's backoff).
    held_back: u32,
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    /// The sequence's last position when `xid` was assigned.
    hi: i64,
    /// A transaction id assigned after the sequence was read.
    xid: u64,
}

impl Watermark {
    /// Every position at or below this is final.
    pub(crate) fn safe(&self) -> i64 {
        self.safe
    }

    /// Forgets everything known when the sequence, read after the final
    /// position `known` was established, stands below it (`hi`): on one
    /// server a sequence never moves back, so the table is not the one the
    /// watermark was learnt on: a standby promoted before it had the last
    /// commits, a restored backup, a sequence restarted by hand. Positions
    /// up to `known` may be handed out again there, and none of them is
    /// final until proved anew. Returns whether it forgot.
    pub(crate) fn forget_if_behind(&mut self, hi: i64, known: i64) -> bool {
        if hi >= known {
            return false;
        }
        *self = Self::default();
        true
    }

    /// Records that the sequence had handed out up to `hi` before
    /// transaction id `xid` was assigned.
    pub(crate) fn candidate(&mut self, hi: i64, xid: u64) {
        let newest = self.pending.back().map_or(self.safe, |c| c.hi);
        if hi > newest && self.pending.len() < MAX_PENDING {
            self.pending.push_back(Candidate { hi, xid });
        }
    }

    /// True when positions beyond the final one wait for transactions still
    /// running; counts such reads in a row (0 once nothing waits).
    pub(crate) fn note_held_back(&mut self) -> Option<u32> {
        if self.pending.is_empty() {
            self.held_back = 0;
            None
        } else {
            self.held_back = self.held_back.saturating_add(1);
            Some(self.held_back)
        }
    }

    /// Promotes the candidates whose transaction id is below `xmin` (every
    /// transaction below it has ended); returns the final position.
    pub(crate) fn promote(&mut self, xmin: u64) -> i64 {
        while let Some(c) = self.pending.front().copied() {
            if c.xid >= xmin {
                break;
            }
            self.safe = self.safe.max(c.hi);
            self.pending.pop_front();
        }
        self.safe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_is_final_only_once_its_transaction_id_is_below_xmin() {
        let mut w = Watermark::default();
        w.candidate(2, 100);
        assert_eq!(w.promote(100), 0, "xid 100 may still be running");
        assert_eq!(w.promote(101), 2);
    }

    #[test]
    fn candidates_are_promoted_in_order_and_never_move_back() {
        let mut w = Watermark::default();
        w.candidate(5, 10);
        w.candidate(9, 20);
        w.candidate(7, 30); // older than the newest candidate: ignored
        assert_eq!(w.promote(15), 5);
        assert_eq!(w.promote(12), 5);
        assert_eq!(w.promote(21), 9);
        w.candidate(3, 40);
        assert_eq!(w.promote(1_000), 9);
    }

    #[test]
    fn held_back_reads_are_counted_until_nothing_waits() {
        let mut w = Watermark::default();
        assert_eq!(w.note_held_back(), None);
        w.candidate(3, 50);
        assert_eq!(w.note_held_back(), Some(1));
        assert_eq!(w.note_held_back(), Some(2));
        w.promote(51);
        assert_eq!(w.note_held_back(), None);
    }

    #[test]
    fn a_sequence_behind_the_final_position_forgets_it() {
        let mut w = Watermark::default();
        w.candidate(2_243, 10);
        assert_eq!(w.promote(11), 2_243);
        w.candidate(2_250, 12);
        assert!(!w.forget_if_behind(2_243, 2_243), "not behind");
        assert!(w.forget_if_behind(2_031, 2_243));
        assert_eq!(w.safe(), 0);
        assert_eq!(w.note_held_back(), None, "the old candidates are gone");
        w.candidate(2_031, 5);
        assert_eq!(w.promote(6), 2_031);
    }

    #[test]
    fn the_number_of_candidates_is_bounded() {
        let mut w = Watermark::default();
        for i in 1..=1_000 {
            w.candidate(i, i as u64);
        }
        assert_eq!(w.pending.len(), MAX_PENDING);
        assert_eq!(w.promote(u64::MAX), MAX_PENDING as i64);
    }
}
