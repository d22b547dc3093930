//! The read-model error family.

use uuid::Uuid;

/// The cause carried by an error: the driver's or serde's own error.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A read-model repository failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadModelError {
    /// No row with this id exists (or it is soft-deleted where that matters).
    #[error("read model {id} not found in {table}")]
    NotFound {
        /// The table searched.
        table: String,
        /// The id asked for.
        id: Uuid,
    },
    /// An optimistic version check failed.
    #[error(
        "version conflict on {table} {id}: expected version {expected}, found {}",
        found_version(*.actual)
    )]
    VersionConflict {
        /// The table.
        table: String,
        /// The model id.
        id: Uuid,
        /// The version the caller expected.
        expected: i64,
        /// The version stored, when known.
        actual: Option<i64>,
    },
    /// The table's schema does not fit the model.
    #[error("schema mismatch on {table}.{column}: {reason}")]
    SchemaMismatch {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// What does not fit.
        reason: String,
        /// The driver's error, when one said so (a column that did not
        /// decode as the field's type).
        #[source]
        source: Option<Cause>,
    },
    /// A query named an unknown field or operator, or had a bad value.
    #[error("invalid query: {0}")]
    InvalidQuery(String),
    /// A model breaks the contract: version below 1, or NULL in a field that
    /// is not nullable.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// A model could not be converted to or from its stored form.
    #[error("serialization error: {model}: {reason}")]
    Serialization {
        /// The model's type name.
        model: &'static str,
        /// What did not convert.
        reason: String,
        /// serde's error, when serde failed.
        #[source]
        source: Option<Cause>,
    },
    /// A projection gave up on an event: the handler or the database kept
    /// failing after the retry budget (or failed in a way not worth
    /// retrying). The projection's checkpoint is still before `position`.
    #[error("projection {projection:?} stopped at position {position} after {attempts} attempt(s): {cause}")]
    ProjectionFailed {
        /// The projection's name.
        projection: String,
        /// The position of the event that failed.
        position: i64,
        /// How many times it was tried.
        attempts: u32,
        /// The last failure.
        #[source]
        cause: Box<crate::Error>,
    },
    /// A wait for a projection's checkpoint to reach a position ended
    /// first: its timeout ran out, or nothing publishes the checkpoint any
    /// more.
    #[error(
        "the projection's checkpoint ({checkpoint:?}) did not reach position {position}: {reason}"
    )]
    NotCaughtUp {
        /// The position waited for.
        position: i64,
        /// The checkpoint when the wait ended.
        checkpoint: Option<i64>,
        /// Why the wait ended ("timed out after 2s", ...).
        reason: String,
    },
    /// A segmented runner was asked to run `asked` segments while
    /// checkpoints of the projection split into another count exist: its
    /// segments would start from position 0 and apply every event again
    /// into the same read model. Nothing was applied.
    #[error(
        "projection {projection:?} has checkpoints of {found} segment(s) ({examples}) but this runner was asked for {asked}: \
         a changed segment count applies every event again into the same read model, so it needs a rebuild. \
         Run it with {found} segment(s) again, or stop every runner, empty the read model and delete the checkpoints \
         {projection}/segment-*-of-{found} (docs/projections.md, \"Changing the segment count\") before starting with {asked}"
    )]
    SegmentCountChanged {
        /// The projection's base name.
        projection: String,
        /// The segment count of the checkpoints found (the lowest, when
        /// there are several).
        found: u32,
        /// Every checkpoint name found that is not of `asked` segments (up
        /// to five, comma-separated).
        examples: String,
        /// The segment count this runner was built with.
        asked: u32,
    },
}

/// "version 2", or "no row" when the row is gone: the end of a
/// [`ReadModelError::VersionConflict`] message.
fn found_version(actual: Option<i64>) -> String {
    actual.map_or_else(|| "no row".to_owned(), |v| format!("version {v}"))
}

impl ReadModelError {
    /// A [`ReadModelError::SchemaMismatch`] without a driver error.
    pub fn schema_mismatch(
        table: impl Into<String>,
        column: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        ReadModelError::SchemaMismatch {
            table: table.into(),
            column: column.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// True for [`ReadModelError::Serialization`].
    pub fn is_serialization(&self) -> bool {
        matches!(self, ReadModelError::Serialization { .. })
    }

    /// True for [`ReadModelError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadModelError::NotFound { .. })
    }

    /// True for [`ReadModelError::VersionConflict`].
    pub fn is_version_conflict(&self) -> bool {
        matches!(self, ReadModelError::VersionConflict { .. })
    }

    /// The position of the event a projection stopped at, for
    /// [`ReadModelError::ProjectionFailed`].
    pub fn failed_position(&self) -> Option<i64> {
        match self {
            ReadModelError::ProjectionFailed { position, .. } => Some(*position),
            _ => None,
        }
    }

    /// True for [`ReadModelError::NotCaughtUp`].
    pub fn is_not_caught_up(&self) -> bool {
        matches!(self, ReadModelError::NotCaughtUp { .. })
    }

    /// True for [`ReadModelError::InvalidQuery`].
    pub fn is_invalid_query(&self) -> bool {
        matches!(self, ReadModelError::InvalidQuery(_))
    }
}

#[cfg(test)]
mod tests {
    use super::ReadModelError;

    #[test]
    fn version_conflicts_read_as_prose() {
        let conflict = |actual| ReadModelError::VersionConflict {
            table: "widgets".into(),
            id: uuid::Uuid::nil(),
            expected: 1,
            actual,
        };
        let nil = uuid::Uuid::nil();
        assert_eq!(
            conflict(Some(2)).to_string(),
            format!("version conflict on widgets {nil}: expected version 1, found version 2")
        );
        assert_eq!(
            conflict(None).to_string(),
            format!("version conflict on widgets {nil}: expected version 1, found no row")
        );
    }
}
