//! The unfenced batch statement's two ends (`BATCH` in `statements.rs`):
//! the items it takes, and the failed positions it answers with.

/// An item of `BATCH`: a lock is its id, an unlock the id's bitwise
/// complement. Lock ids are never negative (the top bit of the key's
/// hash is cleared), so the sign says which.
pub(super) fn batch_item(lock_id: i64, lock: bool) -> i64 {
    debug_assert!(lock_id >= 0, "lock ids are never negative");
    if lock {
        lock_id
    } else {
        !lock_id
    }
}

/// Per item of a batch of `n`, whether it succeeded, from the 1-based
/// positions of those that failed, into `out` (empty when called). A
/// position out of range is an answer this session cannot trust: `out` is
/// left empty (the caller's length check then ends the session).
pub(super) fn outcomes(n: usize, failed: &[i64], out: &mut Vec<(bool, Option<u64>)>) {
    out.resize(n, (true, None));
    for &pos in failed {
        match usize::try_from(pos).ok().and_then(|p| p.checked_sub(1)) {
            Some(i) if i < n => out[i].0 = false,
            _ => return out.clear(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{batch_item, outcomes};

    fn answers(n: usize, failed: &[i64]) -> Vec<(bool, Option<u64>)> {
        let mut out = Vec::new();
        outcomes(n, failed, &mut out);
        out
    }

    #[test]
    fn a_batch_item_says_lock_or_unlock_by_its_sign_and_keeps_the_id() {
        for id in [0, 1, 7183457195969485844, i64::MAX] {
            assert_eq!(batch_item(id, true), id);
            let unlock = batch_item(id, false);
            assert!(unlock < 0, "{id}");
            // What the statement's int8not gives back.
            assert_eq!(!unlock, id);
        }
    }

    #[test]
    fn the_positions_that_failed_mark_their_items_and_no_other() {
        let got: Vec<bool> = answers(4, &[3, 1]).into_iter().map(|(ok, _)| ok).collect();
        assert_eq!(got, [false, true, false, true]);
        assert!(answers(2, &[])
            .iter()
            .all(|(ok, fence)| *ok && fence.is_none()));
    }

    #[test]
    fn a_position_outside_the_batch_is_no_answer_at_all() {
        assert!(answers(2, &[3]).is_empty());
        assert!(answers(2, &[0]).is_empty());
        assert!(answers(2, &[-1]).is_empty());
    }
}
