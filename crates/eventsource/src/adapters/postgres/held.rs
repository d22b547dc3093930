//! [`HeldLock`]: ownership of one granted advisory lock.
//!
//! Whoever owns a `HeldLock` owns the lock: a guard, the registry (manual
//! locks), or a reply in flight to a caller. Dropping it, wherever that
//! happens (a cancelled future, a panic, a reply nobody received), sends the
//! unlock to the session that holds the lock. This is what makes every
//! entry point cancel safe.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::registry::Registry;
use super::session::{Op, SessionHandle};
use crate::ports::error::{Error, LockLostError, Result};
use crate::ports::locks::{BoxFuture, GuardBackend};

pub(crate) struct HeldLock {
    lock_id: i64,
    token: u64,
    key: Arc<str>,
    session: SessionHandle,
    registry: Arc<Registry>,
    armed: bool,
}

impl HeldLock {
    pub(crate) fn new(
        lock_id: i64,
        token: u64,
        key: Arc<str>,
        session: SessionHandle,
        registry: Arc<Registry>,
    ) -> Self {
        Self {
            lock_id,
            token,
            key,
            session,
            registry,
            armed: true,
        }
    }

    pub(crate) fn lock_id(&self) -> i64 {
        self.lock_id
    }

    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// Sends the unlock; false if the session is gone (and with it the lock).
    fn send_unlock(
        &mut self,
        reply: Option<oneshot::Sender<std::result::Result<bool, crate::BackendError>>>,
    ) -> bool {
        self.armed = false;
        self.registry.begin_release(self.lock_id, self.token);
        let sent = self.session.send(Op::Unlock {
            lock_id: self.lock_id,
            token: self.token,
            reply,
        });
        if !sent {
            self.registry.finish(self.lock_id, self.token);
        }
        sent
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(key = %self.key, lock_id = self.lock_id, "lock released on drop");
            self.send_unlock(None);
        }
    }
}

impl GuardBackend for HeldLock {
    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.send_unlock(Some(tx));
        // Errors are built only on the error paths: a release that
        // succeeds allocates nothing here beyond the reply channel.
        let key = self.key.clone();
        let lost = move |reason: &str| {
            Error::LockLost(LockLostError {
                key: key.to_string(),
                reason: reason.to_owned(),
            })
        };
        Box::pin(async move {
            const GONE: &str = "its database session had ended";
            if !sent {
                return Err(lost(GONE));
            }
            match rx.await {
                Ok(Ok(true)) => Ok(()),
                Ok(Ok(false)) => Err(lost("it was released by release_all or its session ended")),
                Ok(Err(e)) => Err(Error::Backend(e)),
                Err(_) => Err(lost(GONE)),
            }
        })
    }

    fn into_manual(self: Box<Self>) {
        let registry = self.registry.clone();
        if let Err(lock) = registry.put_manual(*self) {
            drop(lock);
        }
    }
}
