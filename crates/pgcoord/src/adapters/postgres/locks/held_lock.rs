//! [`HeldLock`]: ownership of one granted advisory lock.
//!
//! Whoever owns a `HeldLock` owns the lock: a guard, the book (manual
//! locks, as a flag), or a reply in flight to a caller. Dropping it, wherever that
//! happens (a cancelled future, a panic, a reply nobody received), sends the
//! unlock to the session that holds the lock. This is what makes every
//! entry point leak-free when dropped.
//!
//! This file sits at the bottom of the adapter: it reaches a session only
//! through the [`UnlockSink`] trait (the session's mailbox implements it)
//! and the book of holdings only through [`ReleaseBook`].

use std::sync::Arc;

use tokio::sync::oneshot;

use super::co_poll::CoPolled;
use super::hold_token::HoldToken;
use crate::ports::error::{BackendError, Error, LockLostError, Result};
use crate::ports::locks::{BoxFuture, GuardBackend};

/// Where a session's answer to an unlock goes: whether the lock was still held.
pub(crate) type UnlockReply = oneshot::Sender<std::result::Result<bool, BackendError>>;

/// A session that can be asked to unlock (or downgrade) a lock it holds.
pub(crate) trait UnlockSink: Send + Sync + 'static {
    /// Queues the unlock of `lock_id` owned by `token`; false if the session
    /// is gone (and the lock with it).
    fn send_unlock(&self, lock_id: i64, token: HoldToken, reply: Option<UnlockReply>) -> bool;
    /// The session's work, for a caller waiting for its answer to help
    /// along (see [`CoPolled::help`]).
    fn help(&self) -> Arc<CoPolled>;
    /// Queues turning the exclusive hold of `lock_id` owned by `token` into
    /// a shared one on the same session; the reply says whether it was
    /// still held. False if the session is gone.
    fn send_downgrade(&self, lock_id: i64, token: HoldToken, reply: UnlockReply) -> bool;
    /// Whether the session is known to have ended (its locks are lost,
    /// even before the book has forgotten them).
    fn has_ended(&self) -> bool;
    /// How the session ended, once it has and that is known (the server's
    /// words, a failed liveness check, a lease that ran out).
    fn ended_why(&self) -> Option<&str>;
    /// Whether the session's manager has been closed (which ends it).
    fn manager_closed(&self) -> bool;
}

/// The session a lock lives on, as the bookkeeping sees it.
pub(crate) type SessionRef = Arc<dyn UnlockSink>;

/// The bookkeeping a lock's release updates (the manager's book of
/// holdings implements it).
pub(crate) trait ReleaseBook: Send + Sync + 'static {
    /// The owner `token` starts releasing `lock_id`.
    fn begin_release(&self, lock_id: i64, token: HoldToken) -> bool;
    /// `lock_id` is no longer held by `token` (released or lost).
    fn finish(&self, lock_id: i64, token: HoldToken);
    /// Keeps a granted lock until `release(key)`; gives it back if its
    /// owner no longer holds it.
    fn put_manual(&self, lock: HeldLock) -> std::result::Result<(), HeldLock>;
}

pub(crate) struct HeldLock {
    lock_id: i64,
    token: HoldToken,
    key: Arc<str>,
    session: SessionRef,
    book: Arc<dyn ReleaseBook>,
    armed: bool,
    granted_at: std::time::Instant,
}

impl HeldLock {
    pub(crate) fn new(
        lock_id: i64,
        token: HoldToken,
        key: Arc<str>,
        session: SessionRef,
        book: Arc<dyn ReleaseBook>,
        granted_at: std::time::Instant,
    ) -> Self {
        Self {
            lock_id,
            token,
            key,
            session,
            book,
            armed: true,
            granted_at,
        }
    }

    pub(crate) fn lock_id(&self) -> i64 {
        self.lock_id
    }

    /// The key, shared with the book and the guard's info.
    pub(crate) fn key(&self) -> &Arc<str> {
        &self.key
    }

    pub(crate) fn token(&self) -> HoldToken {
        self.token
    }

    /// Gives up ownership without unlocking: the book keeps the lock now
    /// (a manual lock) and rebuilds its owner when it is released.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }

    /// Sends the unlock; false if the session is gone (and with it the lock).
    fn send_unlock(&mut self, reply: Option<UnlockReply>) -> bool {
        self.armed = false;
        super::metrics::held_for(self.granted_at);
        self.book.begin_release(self.lock_id, self.token);
        let sent = self.session.send_unlock(self.lock_id, self.token, reply);
        if !sent {
            self.book.finish(self.lock_id, self.token);
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

/// Why a lock's session is gone, as a release or downgrade reports it.
fn session_gone(session: &SessionRef) -> String {
    match (session.manager_closed(), session.ended_why()) {
        (true, _) => "the lock manager was closed".to_owned(),
        (false, Some(why)) => why.to_owned(),
        (false, None) => "its database session had ended".to_owned(),
    }
}

/// Why a lock its session no longer held was gone by the time its release
/// or downgrade ran: a close of the manager (which releases everything
/// first), the session's end, else `release_all`.
fn taken_away(session: &SessionRef) -> String {
    match session.manager_closed() || session.has_ended() {
        true => session_gone(session),
        false => "it was released by release_all".to_owned(),
    }
}

impl GuardBackend for HeldLock {
    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.send_unlock(Some(tx));
        let rx = self.session.help().help(rx);
        // Errors are built only on the error paths: a release that
        // succeeds allocates nothing here beyond the reply channel.
        let key = self.key.clone();
        let lost = move |reason: String| {
            Error::LockLost(LockLostError {
                key: key.to_string(),
                reason,
            })
        };
        let session = self.session.clone();
        Box::pin(async move {
            if !sent {
                return Err(lost(session_gone(&session)));
            }
            match rx.await {
                Ok(Ok(true)) => Ok(()),
                Ok(Ok(false)) => Err(lost(taken_away(&session))),
                Ok(Err(e)) => Err(Error::Backend(e)),
                Err(_) => Err(lost(session_gone(&session))),
            }
        })
    }

    /// The session takes the shared hold and then gives up the exclusive
    /// one, in one statement; the lock keeps its token and its place in
    /// the bookkeeping, and its release then unlocks the shared hold.
    fn downgrade(self: Box<Self>) -> BoxFuture<'static, Result<Box<dyn GuardBackend>>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.session.send_downgrade(self.lock_id, self.token, tx);
        let key = self.key.clone();
        let session = self.session.clone();
        Box::pin(async move {
            let lost = |reason: String| {
                Error::LockLost(LockLostError {
                    key: key.to_string(),
                    reason,
                })
            };
            // On every error path `self` is dropped here, which releases
            // whatever the session still holds.
            match (sent, rx.await) {
                (true, Ok(Ok(true))) => Ok(self as Box<dyn GuardBackend>),
                (true, Ok(Ok(false))) => Err(lost(taken_away(&session))),
                (true, Ok(Err(e))) => Err(Error::Backend(e)),
                _ => Err(lost(session_gone(&session))),
            }
        })
    }

    fn into_manual(self: Box<Self>) {
        let book = self.book.clone();
        if let Err(lock) = book.put_manual(*self) {
            drop(lock);
        }
    }
}
