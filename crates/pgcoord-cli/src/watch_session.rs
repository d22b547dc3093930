//! The database session of a watching command (`lock holders --watch`,
//! `lock top`, `projection status --watch`): kept from one look to the
//! next, and opened again after it ends.
//!
//! Each look is given a short time (`db::refresh_within`), but connecting
//! may take longer: a multi-host URL whose first host went silent (a
//! failover behind a network cut) spends that host's whole
//! `connect_timeout` before the next host is tried. A new session is
//! therefore opened in a task of its own, which a look that runs out of
//! time leaves running: the next look waits for the same attempt, so the
//! watch reaches the next host instead of starting over on the silent one
//! at every look.

use std::future::Future;

use pgcoord::error::{BackendError, BackendErrorKind};
use pgcoord::Error;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

/// A watching command's session: none, being opened, or open.
#[derive(Debug)]
pub enum WatchSession {
    Closed,
    Opening(JoinHandle<Result<Client, Error>>),
    Open(Client),
}

impl WatchSession {
    /// The open session, and whether it is new (opened by this call: its
    /// server may be another than the last one's). Without one, `connect`
    /// opens it in a task of its own, or the attempt under way goes on.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped while a session is being opened, the attempt
    /// goes on and the next call waits for it; an open session is kept.
    pub async fn get<F>(&mut self, connect: impl FnOnce() -> F) -> Result<(&Client, bool), Error>
    where
        F: Future<Output = Result<Client, Error>> + Send + 'static,
    {
        if matches!(self, Self::Open(c) if c.is_closed()) {
            *self = Self::Closed;
        }
        if matches!(self, Self::Closed) {
            *self = Self::Opening(tokio::spawn(connect()));
        }
        let fresh = match self {
            Self::Opening(attempt) => {
                let opened = match attempt.await {
                    Ok(opened) => opened,
                    Err(e) => Err(panicked(e)),
                };
                *self = Self::Closed;
                *self = Self::Open(opened?);
                true
            }
            _ => false,
        };
        match self {
            Self::Open(client) => Ok((client, fresh)),
            _ => unreachable!("the session was opened above"),
        }
    }

    /// Whether the session is open but ended (its server closed it: a
    /// terminated backend, a restart); the next [`get`](Self::get) opens
    /// another.
    pub fn has_ended(&self) -> bool {
        matches!(self, Self::Open(c) if c.is_closed())
    }

    /// Forgets an open session after a look on it failed or stayed silent
    /// (it ends when its server answers, or at once when it is gone); an
    /// attempt to open one goes on.
    pub fn forget_open(&mut self) {
        if matches!(self, Self::Open(_)) {
            *self = Self::Closed;
        }
    }
}

/// The error of a connection attempt whose task panicked (a bug).
fn panicked(e: tokio::task::JoinError) -> Error {
    BackendError::new(
        BackendErrorKind::Other,
        format!("opening a session failed: {e}"),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn refused() -> Error {
        BackendError::new(BackendErrorKind::Connect, "refused").into()
    }

    #[tokio::test]
    async fn a_look_that_runs_out_of_time_leaves_the_attempt_to_the_next() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut session = WatchSession::Closed;
        let slow = || async move {
            let _ = rx.await;
            Err::<Client, _>(refused())
        };
        let first = tokio::time::timeout(Duration::from_millis(10), session.get(slow)).await;
        assert!(first.is_err(), "the first look runs out of time");
        assert!(matches!(session, WatchSession::Opening(_)));
        session.forget_open();
        assert!(matches!(session, WatchSession::Opening(_)), "kept");
        tx.send(()).unwrap();
        // The next look gets the same attempt's outcome: its connect is
        // not called.
        let next = session.get(|| async { panic!("a second attempt") }).await;
        assert!(matches!(next, Err(e) if e.to_string().contains("refused")));
        assert!(matches!(session, WatchSession::Closed));
    }
}
