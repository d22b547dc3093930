//! The manager's one inspection session: `holders()`, `Election::leader`
//! and every look of `Election::watch` run on it instead of connecting
//! each time (a TCP connect, a TLS handshake and authentication per look).

use std::sync::Arc;

use tokio::sync::Mutex;

use crate::adapters::postgres::connection::connect::{Connected, Connector};
use crate::ports::error::{Error, Result};

/// At most one open inspection session, opened at the first look and again
/// after it ended (the server restarted, the session was terminated).
#[derive(Default)]
pub(super) struct InspectionSession {
    open: Mutex<Option<Arc<Connected>>>,
}

impl InspectionSession {
    /// The open session, or a new one when there is none or it has ended.
    /// Concurrent callers share it (their statements are pipelined on one
    /// connection) and wait for one connect, so there is never more than
    /// one.
    ///
    /// Cancel safe: dropped while connecting, the half-open connection is
    /// closed and nothing is kept.
    pub(super) async fn get(&self, connector: &Connector) -> Result<Arc<Connected>> {
        self.get_unless(connector, None).await
    }

    /// As [`get`](Self::get), but never `failed` again: a look that failed
    /// on it because it ended may see it before its end is noticed.
    pub(super) async fn get_unless(
        &self,
        connector: &Connector,
        failed: Option<&Arc<Connected>>,
    ) -> Result<Arc<Connected>> {
        let mut open = self.open.lock().await;
        let usable = |c: &&Arc<Connected>| !ended(c) && !failed.is_some_and(|f| Arc::ptr_eq(f, c));
        if let Some(c) = open.as_ref().filter(usable) {
            return Ok(c.clone());
        }
        *open = None;
        let connected = Arc::new(connector.connect().await.map_err(Error::Backend)?);
        *open = Some(connected.clone());
        Ok(connected)
    }

    /// Closes the session (a look under way keeps its connection until it
    /// is done).
    pub(super) fn close(&self) {
        if let Ok(mut open) = self.open.try_lock() {
            *open = None;
        }
    }
}

fn ended(c: &Connected) -> bool {
    c.closed.is_cancelled() || c.client.is_closed()
}
