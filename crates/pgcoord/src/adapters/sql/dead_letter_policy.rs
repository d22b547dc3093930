//! [`DeadLetterPolicy`]: what a [`ProjectionRunner`](super::ProjectionRunner)
//! does with an event its handler keeps failing on.

use std::fmt;

/// Parks poison events instead of stopping the projection
/// ([`ProjectionRunner::with_dead_letters`](super::ProjectionRunner::with_dead_letters)).
///
/// An event whose handler still fails after the projection's retry
/// policy's attempts, with an error the classifier does not call transient,
/// is written to the dead-letter table (`eventsource_projection_dead_letters`)
/// and the checkpoint moves past it, in one transaction. A transient
/// failure that stays (the database is away) still stops the runner: the
/// event is not at fault.
///
/// Sequenced (the default): an event whose partition key (see
/// [`partition_by`](Self::partition_by)) has a parked event is parked too,
/// behind it, so a partition's events are never applied out of order.
/// Events without a partition key are never held: a poison one is parked
/// alone and the events after it are applied.
pub struct DeadLetterPolicy<E> {
    pub(super) partition: fn(&E) -> Option<String>,
    pub(super) payload: fn(&E) -> Option<serde_json::Value>,
    pub(super) sequenced: bool,
}

impl<E> Default for DeadLetterPolicy<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> DeadLetterPolicy<E> {
    /// Sequenced, with no partition key and no payload until set.
    pub fn new() -> Self {
        Self {
            partition: |_| None,
            payload: |_| None,
            sequenced: true,
        }
    }

    /// The partition key of an event (its aggregate's id, say): events of
    /// one partition are applied in order, a parked one holds the later
    /// ones behind it (when sequenced).
    pub fn partition_by(mut self, key: fn(&E) -> Option<String>) -> Self {
        self.partition = key;
        self
    }

    /// The event as JSON for the dead-letter table's `payload` (shown by
    /// `eventsource projection dlq show`).
    pub fn payload(mut self, to_json: fn(&E) -> Option<serde_json::Value>) -> Self {
        self.payload = to_json;
        self
    }

    /// [`payload`](Self::payload) with the event's `Serialize` form.
    pub fn json_payload(self) -> Self
    where
        E: serde::Serialize,
    {
        self.payload(|e| serde_json::to_value(e).ok())
    }

    /// Whether a partition's later events are held behind its parked one
    /// (default `true`). Off, each poison event is parked alone and every
    /// other event is applied.
    pub fn sequenced(mut self, on: bool) -> Self {
        self.sequenced = on;
        self
    }
}

impl<E> fmt::Debug for DeadLetterPolicy<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetterPolicy")
            .field("sequenced", &self.sequenced)
            .finish_non_exhaustive()
    }
}
