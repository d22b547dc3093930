//! [`Settings`]: what a lock manager is configured with, fixed at build time.
//!
//! Pure data at the bottom of the adapter: the builder fills it in, every
//! layer below reads it.

use std::time::Duration;

/// Settings of a lock manager.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) holder_id: Option<String>,
    pub(crate) max_held_locks: usize,
    pub(crate) shared_sessions: usize,
    pub(crate) max_wait_sessions: usize,
    pub(crate) max_idle_wait_sessions: usize,
    pub(crate) liveness_interval: Duration,
    pub(crate) liveness_timeout: Duration,
    pub(crate) max_batch: usize,
    /// Lock on a hot standby anyway (its locks exclude only its own sessions).
    pub(crate) allow_standby: bool,
    /// One session for everything: waits and `holders()` run on the one
    /// shared session, which then holds at most one lock.
    pub(crate) single_session: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            holder_id: None,
            max_held_locks: 4096,
            shared_sessions: 2,
            max_wait_sessions: 64,
            max_idle_wait_sessions: 4,
            liveness_interval: Duration::from_millis(500),
            liveness_timeout: Duration::from_secs(2),
            max_batch: 4096,
            allow_standby: false,
            single_session: false,
        }
    }
}
