//! [`SessionState`]: what one open session knows, shared by the code that
//! runs its batches and its waits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use super::super::held_lock::{HeldLock, SessionRef, UnlockReply};
use super::super::hold_token::{HoldToken, PackedToken};
use super::super::holdings::Reservation;
use super::super::id_map::{IdMap, IdSet};
use super::super::metrics::LossCause;
use super::super::silence::answer_within;
use super::answer::{self, Kind};
use super::context::SessionContext;
use super::liveness::connection_timed_out;
use super::mailbox::{Granted, Mailbox};
use super::statements::Statements;
use crate::adapters::postgres::connection::connect::pg_error;
use crate::ports::alarm::Alarm;
use crate::ports::error::{BackendError, BackendErrorKind};
use crate::ports::loss::LeaseClock;
use crate::ports::shared_locks::LockMode;

/// When grants were made: both clocks read once for every grant of one
/// answer (a batch's answer grants up to hundreds of locks).
#[derive(Clone, Copy)]
pub(super) struct GrantTime {
    pub(super) at: Instant,
    pub(super) utc: DateTime<Utc>,
}

impl GrantTime {
    pub(super) fn now() -> Self {
        Self {
            at: Instant::now(),
            utc: Utc::now(),
        }
    }
}

pub(super) struct SessionState {
    pub(super) ctx: Arc<SessionContext>,
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) client: Client,
    pub(super) statements: Statements,
    /// lock id -> token of the owner, for every lock this session holds.
    pub(super) held: IdMap<i64, PackedToken>,
    /// The lock ids of `held` held in shared mode (a shared hold, or a
    /// downgraded lock): their unlock is `pg_advisory_unlock_shared`.
    pub(super) shared_mode: IdSet<i64>,
    /// Lease mode: until when the server is known to keep this session.
    pub(super) lease: Option<Arc<LeaseClock>>,
    /// Without a lease, on TCP: until when the server's TCP timeouts keep
    /// this session however silent it is, and how long each confirmation
    /// counts for (a [`LeaseClock::bound`], which loses nothing).
    pub(super) silence: Option<(Arc<LeaseClock>, Duration)>,
}

impl SessionState {
    /// The session's end alarm (every guard's loss signal watches it).
    pub(super) fn dead(&self) -> &Alarm {
        &self.mailbox.dead
    }

    /// What a caller whose statement failed with `e`, a driver error that
    /// ends the session, is told: the connection's own end when it timed
    /// out (the server went silent), else the driver's words.
    pub(super) fn ended_by(&self, e: tokio_postgres::Error) -> BackendError {
        match self.mailbox.loss_cause() {
            LossCause::TimedOut => connection_timed_out(),
            _ => pg_error(e, BackendErrorKind::Closed),
        }
    }

    /// Lease mode: the server answered a statement sent at `sent`, so it
    /// keeps the session at least until `sent + lease`.
    pub(super) fn confirmed(&self, sent: Instant) {
        if let (Some(clock), Some(d)) = (&self.lease, self.ctx.settings.lease_confirmed_for()) {
            clock.extend_to(sent + d);
        }
        if let Some((clock, d)) = &self.silence {
            clock.extend_to(sent + *d);
        }
    }

    /// The clock a guard's loss signal reads: the lease's, else the
    /// bound of the server's TCP timeouts.
    fn loss_clock(&self) -> Option<Arc<LeaseClock>> {
        match &self.lease {
            Some(lease) => Some(lease.clone()),
            None => self.silence.as_ref().map(|(clock, _)| clock.clone()),
        }
    }

    /// One liveness check, bounded by the ping timeout; in lease mode a
    /// success moves the lease on.
    pub(super) async fn ping(&self) -> bool {
        let sent = Instant::now();
        let stamp = self.statements.stamps.next(Kind::Ping);
        let params: [&(dyn ToSql + Sync); 2] = [&self.statements.tag, &stamp.sent];
        let check = answer::one(&self.client, &self.statements.ping, &params, stamp);
        let ok = match answer_within(self.ctx.settings.ping_timeout(), check).await {
            Ok(Ok(Some(_))) => true,
            Ok(Ok(None)) => {
                super::claim::ended_by_pooler(&self.mailbox, "ping");
                false
            }
            Ok(Err(e)) if super::claim::mixed_statements(&e) => {
                super::claim::ended_by_pooler(&self.mailbox, "ping (another client's statements)");
                false
            }
            Ok(Err(e)) => {
                self.mailbox.server_ended(&e);
                false
            }
            Err(_) => false,
        };
        if ok {
            self.confirmed(sent);
        }
        ok
    }

    /// Records an exclusive grant made at `time` in the book and builds
    /// its owner.
    pub(super) fn grant(
        &mut self,
        lock_id: i64,
        key: Arc<str>,
        reservation: Option<Reservation>,
        fence: Option<u64>,
        time: GrantTime,
    ) -> Granted {
        let waited = reservation.is_none();
        let session: SessionRef = self.mailbox.clone();
        let book = &self.ctx.holdings;
        let loss = Alarm::new();
        let token = match reservation {
            Some(res) => book.grant_reserved(res, &session, time.at, loss.clone()),
            None => book.grant_direct(lock_id, &key, &session, time.at, loss.clone()),
        };
        self.granted(lock_id, token, key, loss, fence, time, waited)
    }

    /// The owner of an exclusive grant already recorded in the book as
    /// `token`, whose guard watches `loss`; the session now holds it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn granted(
        &mut self,
        lock_id: i64,
        token: HoldToken,
        key: Arc<str>,
        loss: Arc<Alarm>,
        fence: Option<u64>,
        time: GrantTime,
        waited: bool,
    ) -> Granted {
        let session: SessionRef = self.mailbox.clone();
        self.held.insert(lock_id, token.into());
        self.mailbox.set_held(self.held.len());
        super::super::metrics::held(1);
        let book = self.ctx.holdings.clone();
        Granted {
            lock: HeldLock::new(lock_id, token, key, session, book, time.at),
            dead: self.mailbox.dead.clone(),
            loss,
            waited,
            lease: self.loss_clock(),
            fence,
            mode: LockMode::Exclusive,
            acquired_at: time.utc,
        }
    }

    /// Records a reader (shared) hold granted on this dedicated session in
    /// the book, and builds its owner.
    pub(super) fn grant_reader(&mut self, lock_id: i64, key: Arc<str>, waited: bool) -> Granted {
        let time = GrantTime::now();
        let session: SessionRef = self.mailbox.clone();
        let book = &self.ctx.holdings;
        let loss = Alarm::new();
        let token = book.grant_reader(lock_id, &key, &session, time.at, loss.clone());
        self.held.insert(lock_id, token.into());
        self.mailbox.set_held(self.held.len());
        self.shared_mode.insert(lock_id);
        super::super::metrics::held(1);
        Granted {
            lock: HeldLock::new(lock_id, token, key, session, book.clone(), time.at),
            dead: self.mailbox.dead.clone(),
            loss,
            waited,
            lease: self.loss_clock(),
            fence: None,
            mode: LockMode::Shared,
            acquired_at: time.utc,
        }
    }

    /// Forgets a lock after its unlock ran (or its session ended) and tells
    /// the owner whether the server still had it.
    pub(super) fn settle_unlock(
        &mut self,
        lock_id: i64,
        token: HoldToken,
        ok: bool,
        reply: Option<UnlockReply>,
    ) {
        self.ctx.finish(lock_id, token);
        self.unlocked(lock_id, ok, reply);
    }

    /// [`settle_unlock`](Self::settle_unlock) of a lock the book has
    /// already forgotten (a batch answer records its unlocks at once).
    pub(super) fn unlocked(&mut self, lock_id: i64, ok: bool, reply: Option<UnlockReply>) {
        if !ok {
            tracing::warn!(lock_id, "unlock found the lock not held by its session");
        }
        self.shared_mode.remove(&lock_id);
        if self.held.remove(&lock_id).is_some() {
            self.mailbox.set_held(self.held.len());
            super::super::metrics::held(-1);
        }
        if let Some(r) = reply {
            let _ = r.send(Ok(ok));
        }
    }

    /// `pg_advisory_unlock_all()` on the session, after a wait or a try
    /// that did not end in a grant (the session then holds nothing else). A
    /// cancel of ours that arrives late can hit it (57014): then it runs
    /// once more. False (and the session closed) if it could not be run.
    pub(super) async fn unlock_all(&mut self) -> bool {
        let limit = self
            .ctx
            .settings
            .liveness_timeout
            .max(Duration::from_secs(1));
        for _ in 0..2 {
            let stamp = self.statements.stamps.next(Kind::UnlockAll);
            let params: [&(dyn ToSql + Sync); 2] = [&self.statements.tag, &stamp.sent];
            let run = answer::one(&self.client, &self.statements.unlock_all, &params, stamp);
            match answer_within(limit, run).await {
                Ok(Ok(Some(_))) => return true,
                // Another server connection's (`claim.rs`), or an answer
                // not this request's (`answer.rs`): nothing known done.
                Ok(Ok(None)) => break,
                Ok(Err(e)) if e.code() == Some(&SqlState::QUERY_CANCELED) => continue,
                _ => break,
            }
        }
        self.dead().raise();
        false
    }
}
