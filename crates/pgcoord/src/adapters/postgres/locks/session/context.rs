//! [`SessionContext`]: what every session of one manager shares.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::super::hold_token::HoldToken;
use super::super::holdings::Holdings;
use super::super::settings::Settings;
use super::mailbox::Kind;
use crate::adapters::postgres::connection::connect::Connector;
use crate::ports::alarm::Alarm;

/// Shared by a manager and all of its session actors (and nothing else).
pub(crate) struct SessionContext {
    pub(crate) connector: Arc<Connector>,
    /// The one book of what this manager holds, in both modes.
    pub(crate) holdings: Arc<Holdings>,
    pub(crate) settings: Settings,
    /// Cancelled when the manager is closed or dropped.
    pub(crate) closed: Arc<Alarm>,
    /// `server.address` and `server.port` of the spans.
    pub(crate) server: (String, u16),
    /// Settings every session applies when it opens, for fencing and
    /// lease mode.
    pub(crate) extra_setup: Option<String>,
    open_sessions: AtomicUsize,
}

impl SessionContext {
    pub(crate) fn new(connector: Arc<Connector>, settings: Settings) -> Arc<Self> {
        let extra_setup = extra_setup(&settings);
        Arc::new(Self {
            server: connector.server(),
            extra_setup,
            connector,
            holdings: Holdings::new(settings.max_held_locks),
            settings,
            closed: Alarm::new(),
            open_sessions: AtomicUsize::new(0),
        })
    }

    /// Forgets a lock (released or lost).
    pub(crate) fn finish(&self, lock_id: i64, token: HoldToken) {
        self.holdings.finish(lock_id, token);
    }

    /// How many sessions are connected now.
    pub(crate) fn open_sessions(&self) -> usize {
        self.open_sessions.load(Ordering::Relaxed)
    }

    pub(super) fn session_opened(&self, kind: Kind) {
        self.open_sessions.fetch_add(1, Ordering::Relaxed);
        super::super::metrics::sessions(kind.as_str(), 1);
    }

    pub(super) fn session_closed(&self, kind: Kind) {
        self.open_sessions.fetch_sub(1, Ordering::Relaxed);
        super::super::metrics::sessions(kind.as_str(), -1);
    }
}

/// Fencing: a fence increment must be durable before its grant is
/// reported, whatever the server's default (`synchronous_commit = off`
/// could lose it in a crash and hand the same token out twice).
fn extra_setup(settings: &super::super::settings::Settings) -> Option<String> {
    let fencing = settings.fencing.then_some("SET synchronous_commit = on");
    let lease = settings.lease.map(lease_setup);
    match (fencing, lease) {
        (None, None) => None,
        (Some(f), None) => Some(f.to_owned()),
        (None, Some(l)) => Some(l),
        (Some(f), Some(l)) => Some(format!("{f}; {l}")),
    }
}

/// The server-side bounds of lease mode: the server ends a session that
/// sent nothing for a lease (`idle_session_timeout`, PostgreSQL 14+, first
/// so that older servers fail here), and gives up on a connection whose
/// data goes unacknowledged or whose peer stops answering keepalives
/// within about a lease.
fn lease_setup(lease: std::time::Duration) -> String {
    let ms = lease.as_millis().clamp(1, i32::MAX as u128);
    let idle = (lease.as_secs() / 3).max(1);
    let interval = (lease.as_secs() / 6).max(1);
    format!(
        "SET idle_session_timeout = '{ms}ms'; SET tcp_user_timeout = '{ms}ms'; \
         SET tcp_keepalives_idle = {idle}; SET tcp_keepalives_interval = {interval}; \
         SET tcp_keepalives_count = 2"
    )
}
