//! Session actors: one task per PostgreSQL session.
//!
//! A session is either *shared* (carries uncontended locks of many owners;
//! concurrent requests are batched into one statement over an array of lock
//! ids) or *dedicated* (runs one blocking `pg_advisory_lock` wait at a time,
//! then holds that one lock). The actor owns the `Client`; callers talk to it
//! through a channel, so dropping a caller's future never leaves a statement
//! half-done on a session that someone else then reuses.
//!
//! When the connection ends (backend terminated, server restart) or a
//! liveness check fails, the actor cancels the session's `dead` token —
//! every guard's loss signal is a child of it — forgets its locks in the
//! registry, and exits.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};
use tokio::time::MissedTickBehavior;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};
use tokio_util::sync::CancellationToken;

use super::connect::{ends_session, pg_error};
use super::held::HeldLock;
use super::manager::Core;
use super::pool::WaitPool;
use super::registry::Reservation;
use crate::ports::error::{BackendError, BackendErrorKind};

type Reply<T> = oneshot::Sender<Result<T, BackendError>>;

/// A request to a session actor.
pub(crate) enum Op {
    /// Try to take a reserved lock id (shared sessions).
    TryLock {
        res: Reservation,
        key: Arc<str>,
        reply: Reply<Option<Granted>>,
    },
    /// Wait for a lock id, bounded by `lock_timeout` (dedicated sessions).
    Wait {
        lock_id: i64,
        key: Arc<str>,
        lock_timeout: Option<Duration>,
        permit: OwnedSemaphorePermit,
        reply: Reply<Option<Granted>>,
    },
    /// Release a lock held by `token`. Replies whether it was still held.
    Unlock {
        lock_id: i64,
        token: u64,
        reply: Option<Reply<bool>>,
    },
}

/// A try-lock of the batch being run.
struct PendingLock {
    res: Reservation,
    key: Arc<str>,
    reply: Reply<Option<Granted>>,
}

/// An unlock of the batch being run.
struct PendingUnlock {
    lock_id: i64,
    token: u64,
    reply: Option<Reply<bool>>,
}

/// Buffers reused from batch to batch, so the hot path does not allocate them.
#[derive(Default)]
struct Scratch {
    ops: Vec<Op>,
    locks: Vec<PendingLock>,
    unlocks: Vec<PendingUnlock>,
    ids: Vec<i64>,
    is_lock: Vec<bool>,
}

impl Scratch {
    /// Empties the buffers, and gives back memory after an unusually large batch.
    fn reset(&mut self) {
        const KEEP: usize = 256;
        self.ops.clear();
        self.locks.clear();
        self.unlocks.clear();
        self.ids.clear();
        self.is_lock.clear();
        if self.ids.capacity() > KEEP {
            self.ops.shrink_to(KEEP);
            self.locks.shrink_to(KEEP);
            self.unlocks.shrink_to(KEEP);
            self.ids.shrink_to(KEEP);
            self.is_lock.shrink_to(KEEP);
        }
    }
}

/// A lock just granted.
pub(crate) struct Granted {
    pub(crate) lock: HeldLock,
    pub(crate) loss: CancellationToken,
    pub(crate) acquired_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Shared,
    Dedicated,
}

struct Shared {
    tx: mpsc::UnboundedSender<Op>,
    dead: CancellationToken,
    pid: AtomicI32,
    /// Why the session could not be opened, kept for callers whose request
    /// arrived after the actor had already given up.
    open_error: std::sync::Mutex<Option<BackendError>>,
}

/// A cheap handle on a session actor.
#[derive(Clone)]
pub(crate) struct SessionHandle {
    inner: Arc<Shared>,
}

impl SessionHandle {
    /// Sends `op`; false (and `op` dropped, which undoes it) if the actor is gone.
    pub(crate) fn send(&self, op: Op) -> bool {
        self.inner.tx.send(op).is_ok()
    }

    /// Sends `op`, giving it back if the actor is gone.
    pub(crate) fn send_or_return(&self, op: Op) -> Result<(), Op> {
        self.inner.tx.send(op).map_err(|e| e.0)
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.inner.dead.is_cancelled() || self.inner.tx.is_closed()
    }

    /// Why the session could not be opened, if that is how it ended.
    pub(crate) fn open_error(&self) -> Option<BackendError> {
        let slot = self
            .inner
            .open_error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(BackendError::clone_shallow)
    }

    /// The server process id of the session (0 until connected).
    pub(crate) fn pid(&self) -> i32 {
        self.inner.pid.load(Ordering::Relaxed)
    }
}

struct Stmts {
    try_one: Statement,
    unlock_one: Statement,
    batch: Statement,
    lock: Statement,
    set_lock_timeout: Statement,
    ping: Statement,
    held_ids: Statement,
}

/// The SQL the sessions run, prepared once per session.
mod sql {
    pub(super) const TRY_ONE: &str = "SELECT pg_try_advisory_lock($1)";
    pub(super) const UNLOCK_ONE: &str = "SELECT pg_advisory_unlock($1)";
    /// Locks and unlocks of one batch, in order; `true` in `$2` means lock.
    pub(super) const BATCH: &str = "SELECT CASE WHEN t.op THEN pg_try_advisory_lock(t.id) \
         ELSE pg_advisory_unlock(t.id) END \
         FROM unnest($1::int8[], $2::bool[]) WITH ORDINALITY AS t(id, op, n) ORDER BY t.n";
    pub(super) const LOCK: &str = "SELECT pg_advisory_lock($1)";
    pub(super) const SET_LOCK_TIMEOUT: &str = "SELECT set_config('lock_timeout', $1, false)";
    pub(super) const PING: &str = "SELECT 1";
    pub(super) const HELD_IDS: &str = "SELECT (classid::int8 << 32) | objid::int8 FROM pg_locks \
         WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_backend_pid()";
}

struct Actor {
    core: Arc<Core>,
    pool: Weak<WaitPool>,
    me: Weak<Shared>,
    dead: CancellationToken,
    kind: Kind,
    rx: mpsc::UnboundedReceiver<Op>,
    client: Option<Client>,
    stmts: Option<Stmts>,
    /// lock id -> token of the owner, for every lock this session holds.
    held: HashMap<i64, u64>,
    permit: Option<OwnedSemaphorePermit>,
    opened: bool,
    parked: bool,
    scratch: Scratch,
}

/// Starts a session actor; it connects in the background.
pub(crate) fn spawn(core: Arc<Core>, kind: Kind, pool: Weak<WaitPool>) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let dead = CancellationToken::new();
    let shared = Arc::new(Shared {
        tx,
        dead: dead.clone(),
        pid: AtomicI32::new(0),
        open_error: std::sync::Mutex::new(None),
    });
    let actor = Actor {
        core,
        pool,
        me: Arc::downgrade(&shared),
        dead,
        kind,
        rx,
        client: None,
        stmts: None,
        held: HashMap::new(),
        permit: None,
        opened: false,
        parked: false,
        scratch: Scratch::default(),
    };
    let handle = SessionHandle { inner: shared };
    // The actor keeps its own handle alive until it decides to exit, so its
    // channel stays open for late unlocks from guards.
    let own = handle.clone();
    tokio::spawn(actor.run(own));
    handle
}

fn closed_error() -> BackendError {
    BackendError::new(BackendErrorKind::Closed, "the lock session ended")
}

impl Actor {
    async fn run(mut self, own: SessionHandle) {
        if let Err(e) = self.open().await {
            tracing::debug!(error = %e, "lock session could not be opened");
            if let Some(me) = self.me.upgrade() {
                *me.open_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone_shallow());
            }
            self.dead.cancel();
            self.fail_queued(e);
            return;
        }
        self.opened = true;
        self.core.session_opened();
        let mut tick = tokio::time::interval(self.core.settings.liveness_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick.reset();
        let closed = self.core.closed.clone();
        let mut own = Some(own);
        loop {
            let idle = self.held.is_empty();
            tokio::select! {
                biased;
                _ = self.dead.cancelled() => break,
                _ = closed.cancelled(), if idle => break,
                op = self.rx.recv() => {
                    let Some(op) = op else { break };
                    self.handle(op).await;
                    tick.reset();
                    if self.kind == Kind::Dedicated && self.held.is_empty() && !self.parked {
                        // Back to the pool, or done.
                        self.permit = None;
                        if !self.park(&mut own) {
                            break;
                        }
                    }
                }
                _ = tick.tick() => {
                    if !self.ping().await {
                        tracing::warn!(pid = self.pid(), "lock session failed its liveness check");
                        self.dead.cancel();
                        break;
                    }
                }
            }
        }
        self.shutdown(own);
    }

    fn pid(&self) -> i32 {
        self.me
            .upgrade()
            .map(|s| s.pid.load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    async fn open(&mut self) -> Result<(), BackendError> {
        let connected = self.core.connector.connect().await?;
        let client = connected.client;
        let closed = connected.closed;
        let dead = self.dead.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = closed.cancelled() => dead.cancel(),
                _ = dead.cancelled() => {}
            }
        });
        let prep = |sql: &'static str, types: &'static [Type]| client.prepare_typed(sql, types);
        let r = tokio::try_join!(
            prep(sql::TRY_ONE, &[Type::INT8]),
            prep(sql::UNLOCK_ONE, &[Type::INT8]),
            prep(sql::BATCH, &[Type::INT8_ARRAY, Type::BOOL_ARRAY]),
            prep(sql::LOCK, &[Type::INT8]),
            prep(sql::SET_LOCK_TIMEOUT, &[Type::TEXT]),
            prep(sql::PING, &[]),
            prep(sql::HELD_IDS, &[]),
            client.query_one("SELECT pg_backend_pid()", &[]),
        );
        let (try_one, unlock_one, batch, lock, set_lock_timeout, ping, held_ids, pid_row) =
            r.map_err(|e| pg_error(e, BackendErrorKind::NotPostgres))?;
        let pid: i32 = pid_row.get(0);
        // PostgreSQL 14+: a waiter whose client died leaves the wait queue
        // instead of keeping its place until the lock reaches it. Older
        // servers do not know the setting; that is fine.
        let _ = client
            .batch_execute("SET client_connection_check_interval = '1s'")
            .await;
        if let Some(me) = self.me.upgrade() {
            me.pid.store(pid, Ordering::Relaxed);
        }
        tracing::debug!(pid, kind = ?self.kind, "lock session opened");
        self.stmts = Some(Stmts {
            try_one,
            unlock_one,
            batch,
            lock,
            set_lock_timeout,
            ping,
            held_ids,
        });
        self.client = Some(client);
        Ok(())
    }

    fn handle_ref(&self) -> SessionHandle {
        SessionHandle {
            inner: self
                .me
                .upgrade()
                .expect("the actor keeps its own handle alive"),
        }
    }

    async fn handle(&mut self, first: Op) {
        match first {
            Op::Wait {
                lock_id,
                key,
                lock_timeout,
                permit,
                reply,
            } => {
                self.parked = false;
                self.permit = Some(permit);
                self.run_wait(lock_id, key, lock_timeout, reply).await;
            }
            op => {
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.ops.push(op);
                while scratch.ops.len() < self.core.settings.max_batch {
                    match self.rx.try_recv() {
                        Ok(op) => scratch.ops.push(op),
                        Err(_) => break,
                    }
                }
                self.run_batch(&mut scratch).await;
                scratch.reset();
                self.scratch = scratch;
            }
        }
    }

    /// Runs try-locks and unlocks in one statement.
    async fn run_batch(&mut self, scratch: &mut Scratch) {
        let Scratch {
            ops,
            locks,
            unlocks,
            ids,
            is_lock,
        } = scratch;
        for op in ops.drain(..) {
            match op {
                Op::TryLock { res, key, reply } => {
                    if reply.is_closed() {
                        continue; // the caller left before we started: nothing to undo
                    }
                    locks.push(PendingLock { res, key, reply });
                }
                Op::Unlock {
                    lock_id,
                    token,
                    reply,
                } => {
                    if self.held.get(&lock_id) != Some(&token) {
                        // Already released (release_all) or never ours.
                        self.core.registry.finish(lock_id, token);
                        if let Some(r) = reply {
                            let _ = r.send(Ok(false));
                        }
                        continue;
                    }
                    unlocks.push(PendingUnlock {
                        lock_id,
                        token,
                        reply,
                    });
                }
                Op::Wait { reply, .. } => {
                    let _ = reply.send(Err(BackendError::new(
                        BackendErrorKind::Other,
                        "internal: wait sent to a shared session",
                    )));
                }
            }
        }
        if locks.is_empty() && unlocks.is_empty() {
            return;
        }
        for l in locks.iter() {
            ids.push(l.res.lock_id());
            is_lock.push(true);
        }
        for u in unlocks.iter() {
            ids.push(u.lock_id);
            is_lock.push(false);
        }
        let outcome = {
            let client = self.client.as_ref().expect("open session");
            let stmts = self.stmts.as_ref().expect("open session");
            let query = async {
                if ids.len() == 1 {
                    let stmt = if is_lock[0] {
                        &stmts.try_one
                    } else {
                        &stmts.unlock_one
                    };
                    client
                        .query_one(stmt, &[&ids[0]])
                        .await
                        .map(|row| vec![row.get::<_, bool>(0)])
                } else {
                    client
                        .query(&stmts.batch, &[&*ids, &*is_lock])
                        .await
                        .map(|rows| rows.iter().map(|r| r.get::<_, bool>(0)).collect::<Vec<_>>())
                }
            };
            let limit = self
                .core
                .settings
                .liveness_timeout
                .max(Duration::from_secs(5));
            tokio::time::timeout(limit, query).await
        };
        let results = match outcome {
            Ok(Ok(results)) if results.len() == ids.len() => results,
            Ok(Ok(_)) => {
                self.dead.cancel();
                Vec::new()
            }
            Ok(Err(e)) => {
                if ends_session(&e) {
                    self.dead.cancel();
                    Vec::new()
                } else {
                    let err = pg_error(e, BackendErrorKind::Query);
                    tracing::warn!(error = %err, size = ids.len(), "lock batch failed; reconciling");
                    match self.reconcile(ids, is_lock).await {
                        Some(r) => {
                            // Failed try-locks report the error; unlocks report what the server says.
                            let n = locks.len();
                            for l in locks.drain(..) {
                                drop(l.res);
                                let _ = l.reply.send(Err(err.clone_shallow()));
                            }
                            for (u, ok) in unlocks.drain(..).zip(r.into_iter().skip(n)) {
                                self.settle_unlock(u.lock_id, u.token, ok, u.reply);
                            }
                            return;
                        }
                        None => {
                            self.dead.cancel();
                            Vec::new()
                        }
                    }
                }
            }
            Err(_) => {
                tracing::warn!(
                    size = ids.len(),
                    "lock batch got no answer in time; closing the session"
                );
                self.dead.cancel();
                Vec::new()
            }
        };
        if self.dead.is_cancelled() {
            // The session is gone, and its locks with it.
            for l in locks.drain(..) {
                drop(l.res);
                let _ = l.reply.send(Err(closed_error()));
            }
            for u in unlocks.drain(..) {
                self.settle_unlock(u.lock_id, u.token, false, u.reply);
            }
            return;
        }
        let mut results = results.into_iter();
        for l in locks.drain(..) {
            let granted = results.next().unwrap_or(false);
            if granted {
                let g = self.grant(l.res.lock_id(), l.key, Some(l.res));
                if let Err(Ok(Some(g))) = l.reply.send(Ok(Some(g))) {
                    // The caller left while we worked: dropping releases it.
                    drop(g);
                }
            } else {
                drop(l.res);
                let _ = l.reply.send(Ok(None));
            }
        }
        for u in unlocks.drain(..) {
            let ok = results.next().unwrap_or(false);
            self.settle_unlock(u.lock_id, u.token, ok, u.reply);
        }
    }

    fn settle_unlock(&mut self, lock_id: i64, token: u64, ok: bool, reply: Option<Reply<bool>>) {
        if !ok {
            tracing::warn!(lock_id, "unlock found the lock not held by its session");
        }
        self.held.remove(&lock_id);
        self.core.registry.finish(lock_id, token);
        if let Some(r) = reply {
            let _ = r.send(Ok(ok));
        }
    }

    /// After a failed batch: session locks survive a statement error, so ask
    /// the server what this session holds, give back locks taken for
    /// requests we report as failed, and return per-item "done" flags
    /// (for unlocks: true when the lock is gone). `None` if that failed too.
    async fn reconcile(&mut self, ids: &[i64], is_lock: &[bool]) -> Option<Vec<bool>> {
        let client = self.client.as_ref()?;
        let stmts = self.stmts.as_ref()?;
        let rows = client.query(&stmts.held_ids, &[]).await.ok()?;
        let on_server: HashSet<i64> = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
        let mut give_back = Vec::new();
        let mut done = Vec::with_capacity(ids.len());
        for (id, lock) in ids.iter().zip(is_lock) {
            if *lock {
                if on_server.contains(id) {
                    give_back.push(*id);
                }
                done.push(false);
            } else {
                done.push(!on_server.contains(id));
            }
        }
        if !give_back.is_empty() {
            let ops = vec![false; give_back.len()];
            client.query(&stmts.batch, &[&give_back, &ops]).await.ok()?;
        }
        // Unlocks still held on the server: retry them once.
        let retry: Vec<i64> = ids
            .iter()
            .zip(is_lock)
            .filter(|(id, lock)| !**lock && on_server.contains(id))
            .map(|(id, _)| *id)
            .collect();
        if !retry.is_empty() {
            let ops = vec![false; retry.len()];
            client.query(&stmts.batch, &[&retry, &ops]).await.ok()?;
            for (d, (id, lock)) in done.iter_mut().zip(ids.iter().zip(is_lock)) {
                if !*lock && retry.contains(id) {
                    *d = true;
                }
            }
        }
        Some(done)
    }

    fn grant(&mut self, lock_id: i64, key: Arc<str>, res: Option<Reservation>) -> Granted {
        let handle = self.handle_ref();
        let loss = self.dead.child_token();
        let token = match res {
            Some(res) => self.core.registry.grant_reserved(res, &handle, &loss),
            None => self
                .core
                .registry
                .grant_direct(lock_id, &key, &handle, &loss),
        };
        self.held.insert(lock_id, token);
        Granted {
            lock: HeldLock::new(lock_id, token, key, handle, self.core.registry.clone()),
            loss,
            acquired_at: Utc::now(),
        }
    }

    /// One blocking wait on this dedicated session.
    async fn run_wait(
        &mut self,
        lock_id: i64,
        key: Arc<str>,
        lock_timeout: Option<Duration>,
        mut reply: Reply<Option<Granted>>,
    ) {
        if reply.is_closed() {
            return;
        }
        let liveness_timeout = self.core.settings.liveness_timeout;
        let outcome = {
            let client = self.client.as_ref().expect("open session");
            let stmts = self.stmts.as_ref().expect("open session");
            let ms = lock_timeout.map(|t| t.as_millis().clamp(1, i32::MAX as u128).to_string());
            let wait = async {
                match &ms {
                    Some(ms) => {
                        // Pipelined: set, wait, reset. The reset runs right after
                        // the wait ends, so the timeout never leaks to later use.
                        let zero = "0";
                        let set_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [ms];
                        let lock_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] =
                            [&lock_id];
                        let reset_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&zero];
                        let (set, lock, reset) = tokio::join!(
                            client.query_one(&stmts.set_lock_timeout, &set_params),
                            client.execute(&stmts.lock, &lock_params),
                            client.query_one(&stmts.set_lock_timeout, &reset_params),
                        );
                        (set.is_err() || reset.is_err(), lock)
                    }
                    None => (false, client.execute(&stmts.lock, &[&lock_id]).await),
                }
            };
            tokio::pin!(wait);
            tokio::select! {
                // Polled first, so the statement is on the wire before we
                // ever consider cancelling it.
                biased;
                r = &mut wait => Some((false, r)),
                _ = reply.closed() => {
                    // The caller left: cancel the wait, then see how it ended.
                    self.core.connector.cancel(client.cancel_token()).await;
                    tokio::time::timeout(liveness_timeout, &mut wait).await.ok().map(|r| (true, r))
                }
            }
        };
        let Some((cancelled, (config_failed, lock))) = outcome else {
            // Unknown state: close the session rather than reuse it.
            self.dead.cancel();
            return;
        };
        if config_failed || cancelled {
            // Never reuse: lock_timeout may be left set; our cancel request
            // may still be on its way and would hit the next statement; and
            // a cancel that lands just after the grant reports an error
            // while the session keeps the lock (session locks survive
            // errors). Closing the session settles all three.
            self.dead.cancel();
        }
        match lock {
            Ok(_) => {
                let g = self.grant(lock_id, key, None);
                if let Err(Ok(Some(g))) = reply.send(Ok(Some(g))) {
                    drop(g);
                }
            }
            Err(e) => {
                let timed_out = matches!(
                    e.code(),
                    Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE || *c == SqlState::QUERY_CANCELED
                );
                if ends_session(&e) {
                    // Never park a session the server has ended.
                    self.dead.cancel();
                }
                if timed_out {
                    let _ = reply.send(Ok(None));
                } else {
                    let _ = reply.send(Err(pg_error(e, BackendErrorKind::Query)));
                }
            }
        }
    }

    async fn ping(&self) -> bool {
        let (Some(client), Some(stmts)) = (self.client.as_ref(), self.stmts.as_ref()) else {
            return false;
        };
        matches!(
            tokio::time::timeout(
                self.core.settings.liveness_timeout,
                client.query_one(&stmts.ping, &[])
            )
            .await,
            Ok(Ok(_))
        )
    }

    /// Returns an idle dedicated session to the pool; false when it should close.
    fn park(&mut self, own: &mut Option<SessionHandle>) -> bool {
        if self.dead.is_cancelled() || self.core.closed.is_cancelled() {
            return false;
        }
        self.parked = match (self.pool.upgrade(), own.as_ref()) {
            (Some(pool), Some(h)) => pool.park(h.clone()),
            _ => false,
        };
        self.parked
    }

    fn fail_queued(&mut self, err: BackendError) {
        self.rx.close();
        while let Ok(op) = self.rx.try_recv() {
            match op {
                Op::TryLock { reply, res, .. } => {
                    drop(res);
                    let _ = reply.send(Err(err.clone_shallow()));
                }
                Op::Wait { reply, .. } => {
                    let _ = reply.send(Err(err.clone_shallow()));
                }
                Op::Unlock {
                    lock_id,
                    token,
                    reply,
                } => {
                    self.core.registry.finish(lock_id, token);
                    if let Some(r) = reply {
                        let _ = r.send(Ok(false));
                    }
                }
            }
        }
    }

    fn shutdown(mut self, own: Option<SessionHandle>) {
        self.dead.cancel();
        for (lock_id, token) in self.held.drain() {
            self.core.registry.finish(lock_id, token);
        }
        self.fail_queued(closed_error());
        self.client = None;
        if self.opened {
            self.core.session_closed();
        }
        tracing::debug!(kind = ?self.kind, "lock session closed");
        drop(own);
    }
}
