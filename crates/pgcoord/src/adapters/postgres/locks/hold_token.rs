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
