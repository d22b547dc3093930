//! [`SessionState`]: what one open session knows, shared by the code that
//! runs its batches and its waits.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use super::super::held_lock::{HeldLock, SessionRef, UnlockReply};
use super::super::registry::Reservation;
use super::context::SessionContext;
use super::mailbox::{Granted, Mailbox};
use super::statements::Statements;

pub(super) struct SessionState {
    pub(super) ctx: Arc<SessionContext>,
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) client: Client,
    pub(super) statements: Statements,
    /// lock id -> token of the owner, for every lock this session holds.
    pub(super) held: HashMap<i64, u64>,
}

impl SessionState {
    /// The session's own death token (every loss signal is a child of it).
    pub(super) fn dead(&self) -> &CancellationToken {
        &self.mailbox.dead
    }

    /// Records a grant in the registry and builds its owner.
    pub(super) fn grant(
        &mut self,
        lock_id: i64,
        key: Arc<str>,
        reservation: Option<Reservation>,
    ) -> Granted {
        let session: SessionRef = self.mailbox.clone();
        let loss = self.mailbox.dead.child_token();
        let registry = &self.ctx.registry;
        let token = match reservation {
            Some(res) => registry.grant_reserved(res, &session, &loss),
            None => registry.grant_direct(lock_id, &key, &session, &loss),
        };
        self.held.insert(lock_id, token);
        Granted {
            lock: HeldLock::new(lock_id, token, key, session, registry.clone()),
            loss,
            acquired_at: Utc::now(),
        }
    }

    /// Forgets a lock after its unlock ran (or its session ended) and tells
    /// the owner whether the server still had it.
    pub(super) fn settle_unlock(
        &mut self,
        lock_id: i64,
        token: u64,
        ok: bool,
        reply: Option<UnlockReply>,
    ) {
        if !ok {
            tracing::warn!(lock_id, "unlock found the lock not held by its session");
        }
        self.held.remove(&lock_id);
        self.ctx.registry.finish(lock_id, token);
        if let Some(r) = reply {
            let _ = r.send(Ok(ok));
        }
    }
}
