//! [`CatchUp`]: what a run of events did.

/// What a run of events did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Events applied (and checkpointed).
    pub applied: u64,
    /// Events at or below the checkpoint, skipped.
    pub skipped: u64,
}
