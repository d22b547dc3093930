//! [`SessionContext`]: what every session of one manager shares.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::super::connect::Connector;
use super::super::registry::Registry;
use super::super::settings::Settings;

/// Shared by a manager and all of its session actors (and nothing else).
pub(crate) struct SessionContext {
    pub(crate) connector: Arc<Connector>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) settings: Settings,
    /// Cancelled when the manager is closed or dropped.
    pub(crate) closed: CancellationToken,
    open_sessions: AtomicUsize,
}

impl SessionContext {
    pub(crate) fn new(connector: Arc<Connector>, settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            connector,
            registry: Registry::new(settings.max_held_locks),
            settings,
            closed: CancellationToken::new(),
            open_sessions: AtomicUsize::new(0),
        })
    }

    /// How many sessions are connected now.
    pub(crate) fn open_sessions(&self) -> usize {
        self.open_sessions.load(Ordering::Relaxed)
    }

    pub(super) fn session_opened(&self) {
        self.open_sessions.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn session_closed(&self) {
        self.open_sessions.fetch_sub(1, Ordering::Relaxed);
    }
}
