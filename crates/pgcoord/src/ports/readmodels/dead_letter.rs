//! Dead letters: events a projection parked instead of applying (a
//! handler that keeps failing on them, or an earlier event of their
//! partition parked before them), and the selections the calls on them
//! take.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// An event a projection parked: its checkpoint moved past it without
/// applying it. Listed by the dead-letter calls and
/// `eventsource projection dlq`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The projection that parked it.
    pub projection: String,
    /// The event's position in the feed.
    pub position: i64,
    /// The event's partition key (its aggregate), when it has one.
    pub partition: Option<String>,
    /// The event as JSON, when the projection's dead-letter policy can
    /// serialise it.
    pub payload: Option<serde_json::Value>,
    /// Why it was parked: the handler's last error, or `behind position N`
    /// for an event held behind the parked event N of its partition.
    pub error: String,
    /// Attempts made to apply it (0 for an event held behind another).
    pub attempts: i32,
    /// When it was parked (its first failure).
    pub first_failure: DateTime<Utc>,
    /// When the last attempt failed.
    pub last_failure: DateTime<Utc>,
    /// The parked event of the same partition it is held behind.
    pub behind: Option<i64>,
    /// Marked for replay by the projection's runner (its next batch).
    pub replay_requested: bool,
}

/// An event to park, as the runner hands it to its backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Parking {
    /// The event's position.
    pub position: i64,
    /// The event's partition key, when it has one.
    pub partition: Option<String>,
    /// The event as JSON, when it could be serialised.
    pub payload: Option<serde_json::Value>,
    /// The handler's last error.
    pub error: String,
    /// Attempts made.
    pub attempts: u32,
    /// When the first attempt failed.
    pub first_failure: DateTime<Utc>,
}

/// Which dead letters of a projection a call is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadLetterSelection {
    /// All of them.
    All,
    /// Those at these positions.
    Positions(Vec<i64>),
    /// Those marked for replay by the runner.
    ReplayRequested,
}

impl DeadLetterSelection {
    /// True when `letter` is selected.
    pub fn selects(&self, letter: &DeadLetter) -> bool {
        match self {
            Self::All => true,
            Self::Positions(p) => p.contains(&letter.position),
            Self::ReplayRequested => letter.replay_requested,
        }
    }
}

/// One batch for [`TransactionalReadModels::apply_batch_holding`](super::TransactionalReadModels::apply_batch_holding):
/// the events with their partition keys, and what to do with those whose
/// partition has a parked event.
#[derive(Debug)]
pub struct HoldingBatch<'a, E> {
    /// `(position, event)` pairs, positions increasing.
    pub events: &'a [(i64, &'a E)],
    /// The partition key of each event (same length as `events`).
    pub partitions: &'a [Option<String>],
    /// Park an event whose partition already has a parked event, instead
    /// of applying it (sequenced dead letters).
    pub sequenced: bool,
    /// The event as JSON, for a parked event's payload.
    pub payload: fn(&E) -> Option<serde_json::Value>,
}

/// What [`apply_batch_holding`](super::TransactionalReadModels::apply_batch_holding)
/// did with a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeldBatch {
    /// Events applied.
    pub applied: u64,
    /// Events parked behind a parked event of their partition.
    pub held: u64,
}

/// The error of a backend that keeps no dead letters.
pub(crate) fn unsupported() -> crate::Error {
    crate::Error::InvalidArgument(
        "this read-model backend keeps no dead letters (the PostgreSQL one does)".into(),
    )
}
