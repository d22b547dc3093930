//! [`ReadModelMeta`]: the bookkeeping columns every read model carries.

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The bookkeeping every read model carries: identity, timestamps, version
/// and the soft-delete marker.
///
/// Embed it in the model with `#[serde(flatten)]` so that it serialises as
/// the base columns `id`, `created_at`, `updated_at`, `version` and
/// `deleted_at`.
///
/// Timestamps are truncated to microseconds (what PostgreSQL stores) when a
/// model is written, on every backend: a model reads back equal to what
/// `save` returned, and to what was written when its timestamps were whole
/// microseconds (as [`ReadModelMeta::new`] makes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadModelMeta {
    /// The model's identity; the table's primary key.
    pub id: Uuid,
    /// When the row was first written, in UTC.
    pub created_at: DateTime<Utc>,
    /// When the row was last updated, in UTC.
    pub updated_at: DateTime<Utc>,
    /// The optimistic-concurrency version; starts at 1, grows by one on
    /// every update.
    pub version: i64,
    /// When the row was soft-deleted; `None` for live rows.
    #[serde(default)]
    pub deleted_at: Option<DateTime<Utc>>,
}

impl ReadModelMeta {
    /// Fresh bookkeeping for a new model with id `id`: version 1, both
    /// timestamps now, not deleted.
    pub fn new(id: Uuid) -> Self {
        let now = now_micros();
        Self {
            id,
            created_at: now,
            updated_at: now,
            version: 1,
            deleted_at: None,
        }
    }

    /// Fresh bookkeeping with a random (v4) id.
    pub fn new_random() -> Self {
        Self::new(Uuid::new_v4())
    }

    /// True when the row is soft-deleted.
    pub fn is_deleted(&self) -> bool {
        self.deleted_at.is_some()
    }
}

/// The current time, truncated to microseconds (the precision every backend
/// stores).
pub fn now_micros() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}
