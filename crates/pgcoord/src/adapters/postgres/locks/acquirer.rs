//! [`Acquirer`]: how a lock is obtained, below the public manager.
//!
//! 1. Fast path: a try-lock on the lock id's batched session (batched with
//!    whatever else that session has queued).
//! 2. Contended: the key's [wait line](super::wait_line), which waits inside
//!    PostgreSQL on a dedicated session.
//!
//! Failures are [`AcquireFailure`]s; the public layer attaches the key and
//! the timeout once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::holdings::ReserveError;
use super::session::{
    self, session_ended, Granted, Op, SessionContext, SessionHandle, WaitPool, WaitRequest,
};
use super::silence;
use super::wait_line::WaitLines;
use crate::ports::deadline::deadline_after;
use crate::ports::error::{AcquireFailure, BackendError, BackendErrorKind};

mod reply;
mod routing;
mod shared;

use reply::{alive, wait_reply};

/// How long past its deadline a caller waits for its line to answer (the
/// line ends waits at their deadlines itself; this is a backstop).
const LINE_BACKSTOP: Duration = Duration::from_secs(1);

/// The shortest timeout for which a recently held key skips its try (a
/// line may need to connect a session before its wait reaches the server).
const QUEUE_AT_ONCE_WITHIN: Duration = Duration::from_secs(1);

pub(crate) struct Acquirer {
    pub(crate) ctx: Arc<SessionContext>,
    batched: Vec<Mutex<Option<SessionHandle>>>,
    /// One past the highest slot of `batched` ever opened.
    opened: std::sync::atomic::AtomicUsize,
    pub(crate) pool: Arc<WaitPool>,
    lines: Arc<WaitLines>,
    /// Tasks waiting for a shared hold (outside the wait lines).
    shared_waiting: std::sync::atomic::AtomicUsize,
}

/// The server sent nothing back for `waited` after a request went to it.
pub(crate) fn no_answer(waited: Duration) -> AcquireFailure {
    AcquireFailure::Backend(BackendError::new(
        BackendErrorKind::NoAnswer,
        format!("the server did not answer within {waited:?}"),
    ))
}

impl Acquirer {
    pub(crate) fn new(ctx: Arc<SessionContext>) -> Self {
        let s = &ctx.settings;
        let pool = WaitPool::new(s.max_wait_sessions, s.max_idle_wait_sessions);
        let slots = s.max_batched_sessions.max(s.batched_sessions);
        let batched = (0..slots).map(|_| Mutex::new(None)).collect();
        let lines = WaitLines::new(ctx.clone(), pool.clone());
        Self {
            ctx,
            batched,
            opened: Default::default(),
            pool,
            lines,
            shared_waiting: Default::default(),
        }
    }

    /// The server process ids of the open batched sessions.
    pub(crate) fn batched_session_pids(&self) -> Vec<i32> {
        self.batched
            .iter()
            .filter_map(|slot| {
                let slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                slot.as_ref().filter(|h| !h.is_dead()).map(|h| h.pid())
            })
            .filter(|pid| *pid != 0)
            .collect()
    }

    /// One try-lock on a batched session. `Ok(None)`: held
    /// elsewhere, or by another task of this manager.
    ///
    /// What this manager left behind for the key is settled first: a
    /// server-side wait of a line whose tasks all gave up, and a grant that
    /// no task took and is being given back. Either would make the key look
    /// held by this very manager, and the try would lose to nobody.
    pub(crate) async fn try_once(
        &self,
        lock_id: i64,
        key: &Arc<str>,
    ) -> Result<Option<Granted>, AcquireFailure> {
        self.lines.settled(lock_id).await;
        self.ctx.holdings.settled(lock_id).await;
        let taken = self.try_batched(lock_id, key).await;
        self.unless_closed(taken.and_then(|g| g.map(alive).transpose()))
    }

    /// `outcome`, unless the manager was closed meanwhile: then a grant is
    /// given back (dropping it unlocks), and a session that ended with the
    /// close is reported as the close. A grant that arrived after `close`
    /// took the manager's locks would otherwise be held by a closed manager,
    /// past its `close` (an election loop campaigning again, seen by a
    /// probe); `close` raises the flag before it takes them.
    fn unless_closed<T>(&self, outcome: Result<T, AcquireFailure>) -> Result<T, AcquireFailure> {
        if !self.ctx.closed.is_raised() {
            return outcome;
        }
        match outcome {
            Ok(_) => Err(AcquireFailure::ManagerClosed),
            Err(AcquireFailure::Backend(e)) if e.kind() == BackendErrorKind::Closed => {
                Err(AcquireFailure::ManagerClosed)
            }
            Err(other) => Err(other),
        }
    }

    /// Until when the first attempt of an acquisition sent at `sent` with
    /// `deadline` is given its answer: the deadline, but never less than
    /// the liveness timeout. A server that answers at all gets to say
    /// "granted" or "held", however short the deadline; only one silent
    /// for the liveness timeout is a server that did not answer. `None`
    /// (no bound) for a liveness timeout too long for the clock.
    fn answer_by(&self, sent: Instant, deadline: Instant) -> Option<Instant> {
        deadline_after(sent, self.ctx.settings.liveness_timeout).map(|floor| deadline.max(floor))
    }

    async fn try_batched(
        &self,
        lock_id: i64,
        key: &Arc<str>,
    ) -> Result<Option<Granted>, AcquireFailure> {
        if self.ctx.closed.is_raised() {
            return Err(AcquireFailure::ManagerClosed);
        }
        // A single session holding a shared hold would also be granted the
        // key exclusively (a session never conflicts with itself): its one
        // lock is taken.
        if self.ctx.settings.single_session && self.ctx.holdings.readers_held() > 0 {
            let limit = self.ctx.holdings.budget();
            return Err(AcquireFailure::BudgetExceeded { limit });
        }
        let res = match self.ctx.holdings.reserve(lock_id, key) {
            Ok(res) => res,
            Err(ReserveError::Busy) => return Ok(None),
            Err(ReserveError::Budget(limit)) => {
                return Err(AcquireFailure::BudgetExceeded { limit })
            }
        };
        let (tx, rx) = oneshot::channel();
        let op = Op::TryLock {
            res,
            key: key.clone(),
            reply: tx,
        };
        let session =
            session::send_to(op, || self.batched_session()).map_err(AcquireFailure::Backend)?;
        let answer = session
            .help(rx)
            .await
            .unwrap_or_else(|_| Err(session_ended()));
        answer.map_err(AcquireFailure::Backend)
    }

    /// The first free lock of `keys` (in order), tried in one statement on
    /// one batched session. Keys this manager holds or is taking are left
    /// out. Returns the index into `keys` of the lock taken.
    pub(crate) async fn try_any(
        &self,
        keys: &[(i64, Arc<str>)],
    ) -> Result<Option<(usize, Granted)>, AcquireFailure> {
        if self.ctx.closed.is_raised() {
            return Err(AcquireFailure::ManagerClosed);
        }
        let mut candidates = Vec::with_capacity(keys.len());
        let mut positions = Vec::with_capacity(keys.len());
        for (i, (lock_id, key)) in keys.iter().enumerate() {
            match self.ctx.holdings.reserve(*lock_id, key) {
                Ok(res) => {
                    candidates.push((res, key.clone()));
                    positions.push(i);
                }
                Err(ReserveError::Busy) => {}
                // Out of budget: try those reserved so far, if any.
                Err(ReserveError::Budget(limit)) if candidates.is_empty() => {
                    return Err(AcquireFailure::BudgetExceeded { limit })
                }
                Err(ReserveError::Budget(_)) => break,
            }
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let session = self.batched_session();
        let (tx, rx) = oneshot::channel();
        if let Err(op) = session.send(Op::TryAny {
            candidates,
            reply: tx,
        }) {
            drop(op);
            let e = session.send_failure();
            return Err(AcquireFailure::Backend(e));
        }
        let taken = match rx.await.unwrap_or_else(|_| Err(session_ended())) {
            Ok(Some((index, granted))) => alive(granted).map(|g| Some((positions[index], g))),
            Ok(None) => Ok(None),
            Err(e) => Err(AcquireFailure::Backend(e)),
        };
        self.unless_closed(taken)
    }

    /// Acquires, waiting up to `timeout` (`Some(ZERO)`: one attempt) from
    /// `started`, when the caller's call began (read here when the caller
    /// did not read the clock; only a deadline needs it). A grant whose
    /// session is already known to have ended by the time it reaches the
    /// caller is not returned (see [`alive`]).
    pub(crate) async fn acquire(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        timeout: Option<Duration>,
        started: Option<Instant>,
    ) -> Result<Granted, AcquireFailure> {
        let granted = self.acquire_granted(lock_id, key, timeout, started).await;
        self.unless_closed(granted.and_then(alive))
    }

    async fn acquire_granted(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        timeout: Option<Duration>,
        started: Option<Instant>,
    ) -> Result<Granted, AcquireFailure> {
        if self.ctx.closed.is_raised() {
            return Err(AcquireFailure::ManagerClosed);
        }
        // (when the call began, its deadline)
        let deadline = timeout.and_then(|t| {
            let started = started.unwrap_or_else(Instant::now);
            Some((started, deadline_after(started, t)?))
        });
        if timeout == Some(Duration::ZERO) {
            return self
                .try_once(lock_id, key)
                .await?
                .ok_or(AcquireFailure::Timeout);
        }
        // Tasks of this manager already queued for the key go first. A key
        // whose try failed a moment ago is queued for at once (see
        // `wait_line/recent.rs`), unless the deadline is near: then the try
        // is what tells held from free in time.
        let queue_at_once = self.lines.has_line(lock_id)
            || (!self.ctx.settings.single_session
                && deadline.is_none_or(|(started, d)| d >= started + QUEUE_AT_ONCE_WITHIN)
                && self.lines.recently_held(lock_id));
        if !queue_at_once {
            let attempt = self.try_batched(lock_id, key);
            let first = match deadline
                .and_then(|(started, d)| Some((started, self.answer_by(started, d)?)))
            {
                Some((started, answer_by)) => silence::answer_by(answer_by, attempt)
                    .await
                    .map_err(|_| no_answer(answer_by - started))?,
                None => attempt.await,
            };
            if let Some(granted) = first? {
                return Ok(granted);
            }
            self.lines.found_held(lock_id);
            // Held elsewhere, and the answer came at or after the deadline:
            // that is the timeout. Queuing now would only leave a wait
            // behind in the server that nobody wants.
            if deadline.is_some_and(|(_, d)| Instant::now() >= d) {
                return Err(AcquireFailure::Timeout);
            }
        }
        let deadline = deadline.map(|(_, d)| d);
        if self.ctx.settings.single_session {
            return self.wait_on_shared(lock_id, key, deadline).await;
        }
        let mut ticket = self.lines.join(lock_id, key, deadline);
        let result = match deadline.and_then(|d| deadline_after(d, LINE_BACKSTOP)) {
            None => (&mut ticket.rx).await,
            Some(backstop) => match tokio::time::timeout_at(backstop, &mut ticket.rx).await {
                Ok(r) => r,
                Err(_) => return Err(AcquireFailure::Timeout),
            },
        };
        result.unwrap_or(Err(AcquireFailure::ManagerClosed))
    }

    /// Single-session mode: the wait runs on the batched session itself,
    /// which holds nothing else (the budget is one lock).
    async fn wait_on_shared(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        deadline: Option<Instant>,
    ) -> Result<Granted, AcquireFailure> {
        let Ok(_slot) = self.ctx.holdings.reserve_wait() else {
            let limit = self.ctx.holdings.budget();
            return Err(AcquireFailure::BudgetExceeded { limit });
        };
        let _waiting = super::metrics::WaitingTask::start();
        let abandon = CancellationToken::new();
        // Dropped with this future: the wait is abandoned on the session.
        let _abandon_on_drop = abandon.clone().drop_guard();
        let (tx, rx) = oneshot::channel();
        let request = WaitRequest {
            lock_id,
            key: key.clone(),
            mode: session::WaitMode::Exclusive,
            lock_timeout: deadline.map(|d| {
                d.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            }),
            abandon,
            permit: None,
            seat: None,
            reply: tx,
        };
        let session = self.open_batched(0);
        if session.send(Op::Wait(request)).is_err() {
            let e = session.send_failure();
            return Err(AcquireFailure::Backend(e));
        }
        let granted = wait_reply(rx, deadline, self.ctx.settings.liveness_timeout).await?;
        // The caller owns it now (see `Holdings::grant_direct`).
        let lock = &granted.lock;
        self.ctx.holdings.claim(lock.lock_id(), lock.token());
        Ok(granted)
    }

    /// `holders()` on the manager's own batched session (single-session
    /// mode), or `None` to let the caller open a session of its own.
    pub(crate) async fn holders_on_shared(
        &self,
        keys: &[&str],
    ) -> Option<crate::Result<Vec<crate::adapters::postgres::AdvisoryLock>>> {
        if !self.ctx.settings.single_session {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let keys = keys.iter().map(|k| (*k).to_owned()).collect();
        let session = self.open_batched(0);
        if session.send(Op::Holders { keys, reply: tx }).is_err() {
            let e = session.send_failure();
            return Some(Err(crate::Error::Backend(e)));
        }
        Some(
            rx.await
                .unwrap_or_else(|_| Err(crate::Error::Backend(session_ended()))),
        )
    }

    /// How many tasks wait now: in the manager's wait lines, and for
    /// shared holds.
    pub(crate) fn waiting(&self) -> usize {
        let shared = self
            .shared_waiting
            .load(std::sync::atomic::Ordering::Relaxed);
        self.lines.waiting() + shared
    }

    /// Closes the manager's sessions once their locks are released.
    pub(crate) fn close(&self) {
        self.ctx.closed.raise();
        self.pool.clear();
    }
}
