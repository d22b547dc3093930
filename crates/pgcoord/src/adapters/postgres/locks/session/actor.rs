//! The session actor: opens the session, takes requests from its mailbox,
//! checks liveness while idle, and reports the session's end.
//!
//! When the connection ends (backend terminated, server restart) or a
//! liveness check fails, the actor raises the session's `dead` alarm —
//! every guard's loss signal watches it — forgets its locks in the book of
//! holdings, and exits.

use std::sync::{Arc, Weak};

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::MissedTickBehavior;

use super::super::holders::query_holders;
use super::super::metrics::{self, LossCause};
use super::batch::run_batch;
use super::batch_buffers::BatchBuffers;
use super::context::SessionContext;
use super::downgrade::run_downgrade;
use super::drive::Driven;
use super::liveness::{ended_error, ping_failure_cause, warn_given_up};
use super::mailbox::{Kind, Mailbox, Op, SessionHandle, WaitOutcome};
use super::pool::WaitPool;
use super::queue::Receiver;
use super::state::SessionState;
use super::statements::prepare;
use super::try_any::run_try_any;
use super::wait::run_wait;
use crate::ports::error::{BackendError, BackendErrorKind};
use crate::ports::loss::LeaseClock;

/// The requests a queue's `Vec` keeps room for between batches (about
/// 100 KB of requests): 1,024 tasks queue about 400 at a time.
const KEEP_OPS: usize = 1024;

struct Actor {
    kind: Kind,
    pool: Weak<WaitPool>,
    rx: Receiver<Op>,
    /// What the actor took from its queue and has not run yet.
    incoming: Vec<Op>,
    /// A dedicated session's place among the manager's wait sessions.
    permit: Option<OwnedSemaphorePermit>,
    /// Its seat among a key's dedicated sessions, while it serves a line.
    seat: Option<OwnedSemaphorePermit>,
    parked: bool,
    buffers: BatchBuffers,
}

/// Starts a session actor; it connects in the background.
pub(crate) fn spawn(ctx: Arc<SessionContext>, kind: Kind, pool: Weak<WaitPool>) -> SessionHandle {
    let (mailbox, rx) = Mailbox::new(ctx.closed.clone());
    let actor = Actor {
        kind,
        pool,
        rx,
        incoming: Vec::new(),
        permit: None,
        seat: None,
        parked: false,
        buffers: BatchBuffers::default(),
    };
    tokio::spawn(actor.run(ctx, mailbox.clone()));
    SessionHandle(mailbox)
}

/// Sends a wait to an idle dedicated session of `pool`, or a new one; a
/// session found dead on the way is replaced once. Gives back why the
/// last session tried could not be opened.
pub(crate) fn send_dedicated(
    ctx: &Arc<SessionContext>,
    pool: &Arc<WaitPool>,
    request: super::mailbox::WaitRequest,
) -> Result<(), BackendError> {
    super::mailbox::send_to(Op::Wait(request), || {
        pool.take()
            .unwrap_or_else(|| spawn(ctx.clone(), Kind::Dedicated, Arc::downgrade(pool)))
    })
    .map(drop)
}

/// Prepares a session just connected; refuses a standby unless allowed.
async fn open(
    ctx: &Arc<SessionContext>,
    mailbox: &Arc<Mailbox>,
    client: tokio_postgres::Client,
) -> Result<SessionState, BackendError> {
    let sent = std::time::Instant::now();
    let fencing = ctx.settings.fencing;
    let (statements, identity) = prepare(&client, fencing, ctx.extra_setup.as_deref()).await?;
    if identity.in_recovery && !ctx.settings.allow_standby {
        return Err(BackendError::new(
            BackendErrorKind::Standby,
            "pg_is_in_recovery() is true: advisory locks on a standby do not exclude holders on \
             the primary (connect to the primary, or allow_standby(true) to lock here anyway)",
        ));
    }
    mailbox.set_pid(identity.pid);
    tracing::debug!(pid = identity.pid, "lock session opened");
    Ok(SessionState {
        ctx: ctx.clone(),
        mailbox: mailbox.clone(),
        client,
        statements,
        held: Default::default(),
        shared_mode: Default::default(),
        lease: ctx
            .settings
            .lease_confirmed_for()
            .map(|d| LeaseClock::new(sent + d)),
        silence: silence_clock(ctx, identity.silence_bound, sent),
    })
}

/// Without a lease: the clock of how long the server's TCP timeouts keep
/// the session however silent, counted from `sent` and moved on by every
/// answer, each confirmation counting a tenth less than the bound (at
/// least 50 ms less) so that the holder's view errs early.
fn silence_clock(
    ctx: &SessionContext,
    bound: Option<std::time::Duration>,
    sent: std::time::Instant,
) -> Option<(Arc<LeaseClock>, std::time::Duration)> {
    if ctx.settings.lease.is_some() {
        return None;
    }
    let bound = bound?;
    let margin = (bound / 10).max(std::time::Duration::from_millis(50));
    let counts_for = bound.saturating_sub(margin);
    Some((LeaseClock::bound(sent + counts_for), counts_for))
}

impl Actor {
    /// Connects, then runs the session with its connection polled in this
    /// same task (see [`Driven`]), or in a caller's task that waits for an
    /// answer and finds nobody else polling it (see `CoPolled`).
    async fn run(self, ctx: Arc<SessionContext>, mailbox: Arc<Mailbox>) {
        match ctx.connector.connect_driven().await {
            Ok((client, connection)) => {
                let (co, own) = (mailbox.work.clone(), mailbox.clone());
                let work = self.serve(ctx, mailbox, client);
                co.run(Driven::new(connection, work, own)).await;
            }
            Err(e) => self.open_failed(&ctx, &mailbox, e),
        }
    }

    fn open_failed(mut self, ctx: &SessionContext, mailbox: &Mailbox, e: BackendError) {
        tracing::debug!(error = %e, "lock session could not be opened");
        mailbox.set_open_error(&e);
        mailbox.dead.raise();
        self.fail_queued(ctx, e);
    }

    async fn serve(
        mut self,
        ctx: Arc<SessionContext>,
        mailbox: Arc<Mailbox>,
        client: tokio_postgres::Client,
    ) {
        let mut state = match open(&ctx, &mailbox, client).await {
            Ok(state) => state,
            Err(e) => return self.open_failed(&ctx, &mailbox, e),
        };
        ctx.session_opened(self.kind);
        let mut tick = tokio::time::interval(ctx.settings.ping_interval());
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick.reset();
        let (dead, closed) = (mailbox.dead.clone(), ctx.closed.clone());
        // Made once: each wait registers with its alarm on its first poll.
        let (ended, closing) = (dead.raised(), closed.raised());
        tokio::pin!(ended, closing);
        loop {
            let idle = state.held.is_empty();
            tokio::select! {
                biased;
                _ = &mut ended => break,
                _ = &mut closing, if idle => break,
                () = self.rx.take_all(&mut self.incoming) => {
                    if !self.handle(&mut state).await {
                        dead.raise();
                        break;
                    }
                    tick.reset();
                    if self.kind == Kind::Dedicated && state.held.is_empty() && !self.parked {
                        // Back to the pool, or done. The places go only
                        // once it is parked: a line waiting for its key's
                        // seat then finds this session idle.
                        let parked = self.park(&state);
                        self.permit = None;
                        self.seat = None;
                        if !parked {
                            break;
                        }
                    }
                }
                _ = lease_expiry(&state) => {
                    tracing::warn!(pid = state.mailbox.pid(), "lock session's lease ran out unconfirmed; its locks count as lost");
                    mailbox.end(LossCause::LeaseExpired);
                    break;
                }
                _ = tick.tick() => {
                    if !state.ping().await {
                        // The ping's wait may outlast the lease: then the
                        // lease ran out first, and that is the cause. A
                        // ping a pooler sent elsewhere was answered, and
                        // said so already (`claim::ended_by_pooler`).
                        let cause = match mailbox.has_open_error() {
                            true => LossCause::SessionEnded,
                            false => ping_failure_cause(state.lease.as_deref()),
                        };
                        if cause != LossCause::SessionEnded {
                            warn_given_up(cause, state.mailbox.pid(), &ctx.settings);
                        }
                        mailbox.end(cause);
                        break;
                    }
                }
            }
        }
        self.shutdown(state);
    }

    /// Runs the requests taken from the queue, in order; on a batched
    /// session, consecutive try-locks and unlocks go out as one statement
    /// (up to `max_batch` each). False when the session must close: the
    /// requests not run yet stay in `incoming`, answered at shutdown.
    async fn handle(&mut self, state: &mut SessionState) -> bool {
        let mut buffers = std::mem::take(&mut self.buffers);
        let mut ops = std::mem::take(&mut self.incoming);
        let mut rest = ops.drain(..);
        let mut ok = true;
        while ok {
            let op = rest.next();
            let batchable = matches!(op, Some(Op::TryLock { .. } | Op::Unlock { .. }));
            let full = buffers.ops.len() >= state.ctx.settings.max_batch;
            if !buffers.ops.is_empty() && (!batchable || full) {
                run_batch(state, &mut buffers).await;
                buffers.reset();
                ok = !state.dead().is_raised();
                if !ok {
                    self.incoming.extend(op);
                    break;
                }
            }
            let Some(op) = op else { break };
            ok = match op {
                Op::Wait(mut req) => {
                    self.parked = false;
                    // Kept while the session holds what the wait was granted.
                    self.permit = req.permit.take();
                    self.seat = req.seat.take();
                    run_wait(state, req).await
                }
                Op::TryAny { candidates, reply } => {
                    run_try_any(state, candidates, reply).await;
                    !state.dead().is_raised()
                }
                Op::Holders { keys, reply } => {
                    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                    let _ = reply.send(query_holders(&state.client, &keys).await);
                    true
                }
                Op::Downgrade {
                    lock_id,
                    token,
                    reply,
                } => {
                    run_downgrade(state, lock_id, token, reply).await;
                    !state.dead().is_raised()
                }
                op => {
                    buffers.ops.push(op);
                    true
                }
            };
        }
        self.incoming.extend(rest);
        // Its capacity goes back to the queue at the next take; a burst's
        // is given back here (see `BatchBuffers::reset`).
        ops.shrink_to(KEEP_OPS);
        if self.incoming.is_empty() {
            self.incoming = ops;
        }
        self.buffers = buffers;
        ok
    }

    /// Returns an idle dedicated session to the pool; false when it should close.
    fn park(&mut self, state: &SessionState) -> bool {
        if state.dead().is_raised() || state.ctx.closed.is_raised() {
            return false;
        }
        self.parked = match self.pool.upgrade() {
            Some(pool) => pool.park(SessionHandle(state.mailbox.clone())),
            None => false,
        };
        self.parked
    }

    fn fail_queued(&mut self, ctx: &SessionContext, err: BackendError) {
        let mut ops = std::mem::take(&mut self.incoming);
        ops.extend(self.rx.close());
        for op in ops {
            match op {
                Op::TryLock { reply, res, .. } => {
                    drop(res);
                    let _ = reply.send(Err(err.clone_shallow()));
                }
                Op::Wait(w) => {
                    let _ = w.reply.send(WaitOutcome::Failed(err.clone_shallow()));
                }
                Op::TryAny { reply, candidates } => {
                    drop(candidates);
                    let _ = reply.send(Err(err.clone_shallow()));
                }
                Op::Holders { reply, .. } => {
                    let _ = reply.send(Err(crate::Error::Backend(err.clone_shallow())));
                }
                Op::Downgrade { reply, .. } => {
                    let _ = reply.send(Ok(false));
                }
                Op::Unlock {
                    lock_id,
                    token,
                    reply,
                } => {
                    ctx.finish(lock_id, token);
                    if let Some(r) = reply {
                        let _ = r.send(Ok(false));
                    }
                }
            }
        }
    }

    fn shutdown(mut self, mut state: SessionState) {
        state.dead().raise();
        let lost = state.held.len();
        state.shared_mode.clear();
        for (lock_id, token) in state.held.drain() {
            state.ctx.finish(lock_id, token.into());
        }
        state.mailbox.set_held(0);
        metrics::held(-(lost as i64));
        metrics::lost(lost, state.mailbox.loss_cause());
        let ctx = state.ctx.clone();
        let cause = state.mailbox.loss_cause();
        self.fail_queued(&ctx, ended_error(cause, &ctx.settings));
        drop(state);
        ctx.session_closed(self.kind);
        tracing::debug!(kind = ?self.kind, "lock session closed");
    }
}

/// Resolves when the session's lease has run out (never without a lease).
async fn lease_expiry(state: &SessionState) {
    let Some(clock) = &state.lease else {
        return std::future::pending().await;
    };
    loop {
        let deadline = clock.deadline();
        if std::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline.into()).await;
    }
}
