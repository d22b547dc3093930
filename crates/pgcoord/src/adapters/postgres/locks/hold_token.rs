//! [`HoldToken`]: names one ownership of a lock in the manager's book.

use std::num::NonZeroU64;

/// One ownership of a lock, unique within its manager, and the part of the
/// book it lives in. Removals name their token, so a late removal never
/// erases the next owner of the same lock id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum HoldToken {
    /// The one local exclusive owner of a lock id (a downgraded lock keeps
    /// its exclusive token: it still keeps the manager's other tasks off
    /// the id).
    Exclusive(NonZeroU64),
    /// One task's shared (reader) hold, on a dedicated session of its own;
    /// several may exist for one lock id.
    Reader(NonZeroU64),
}

/// A [`HoldToken`] in 8 bytes (the enum takes 16): what a session keeps
/// for each lock it holds, so a session holding thousands of locks keeps
/// a smaller map. The serial is shifted left by one, the low bit is the
/// mode; serials count up from 1 by one per grant, so they never reach the
/// top bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PackedToken(NonZeroU64);

impl From<HoldToken> for PackedToken {
    fn from(token: HoldToken) -> Self {
        let (serial, bit) = match token {
            HoldToken::Exclusive(s) => (s, 0),
            HoldToken::Reader(s) => (s, 1),
        };
        debug_assert!(serial.get() < 1 << 63, "a serial never reaches the top bit");
        // Shifting a non-zero serial below the top bit keeps it non-zero.
        Self(NonZeroU64::new(serial.get() << 1 | bit).unwrap_or(NonZeroU64::MIN))
    }
}

impl From<PackedToken> for HoldToken {
    fn from(packed: PackedToken) -> Self {
        let serial = NonZeroU64::new(packed.0.get() >> 1).unwrap_or(NonZeroU64::MIN);
        if packed.0.get() & 1 == 0 {
            HoldToken::Exclusive(serial)
        } else {
            HoldToken::Reader(serial)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_tokens_round_trip() {
        for serial in [1, 2, 3, 1 << 40, (1 << 63) - 1] {
            let serial = NonZeroU64::new(serial).unwrap();
            for token in [HoldToken::Exclusive(serial), HoldToken::Reader(serial)] {
                assert_eq!(HoldToken::from(PackedToken::from(token)), token);
            }
        }
        assert_eq!(std::mem::size_of::<Option<PackedToken>>(), 8);
    }
}
