//! A session's mailbox: the requests it takes ([`Op`]) and the handle
//! callers hold ([`SessionHandle`]).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use super::super::co_poll::{CoPolled, Helping};
use super::super::held_lock::{HeldLock, UnlockReply, UnlockSink};
use super::super::hold_token::HoldToken;
use super::super::holders::AdvisoryLock as HoldersRow;
use super::super::holdings::Reservation;
use super::super::metrics::LossCause;
use super::queue::{queue, Queue, Receiver};
use crate::adapters::postgres::connection::connect::{timed_out, with_causes};
use crate::ports::alarm::Alarm;
use crate::ports::error::{BackendError, BackendErrorKind};
use crate::ports::session_end::SessionEnd;
use crate::ports::shared_locks::LockMode;

pub(crate) type Reply<T> = oneshot::Sender<Result<T, BackendError>>;

/// What a session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Carries uncontended locks of many owners, their requests batched.
    Batched,
    /// Runs one blocking wait, then holds that one lock.
    Dedicated,
}

impl Kind {
    /// The `eventsource.lock.session.kind` attribute.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Batched => "batched",
            Kind::Dedicated => "dedicated",
        }
    }
}

/// A request to a session actor.
pub(crate) enum Op {
    /// Try to take a reserved lock id (batched sessions).
    TryLock {
        res: Reservation,
        key: Arc<str>,
        reply: Reply<Option<Granted>>,
    },
    /// Take the first free id of the list (batched sessions; never fenced).
    TryAny {
        candidates: Vec<(Reservation, Arc<str>)>,
        reply: Reply<Option<(usize, Granted)>>,
    },
    /// Wait for a lock id inside PostgreSQL (dedicated sessions).
    Wait(WaitRequest),
    /// Who holds and waits for these keys (all advisory locks if none),
    /// from `pg_locks`, on this session.
    Holders {
        keys: Vec<String>,
        reply: oneshot::Sender<crate::Result<Vec<HoldersRow>>>,
    },
    /// Release a lock held by `token`. Replies whether it was still held.
    Unlock {
        lock_id: i64,
        token: HoldToken,
        reply: Option<UnlockReply>,
    },
    /// Turn the exclusive lock held by `token` into a shared hold, with no
    /// gap. Replies whether it was still held.
    Downgrade {
        lock_id: i64,
        token: HoldToken,
        reply: UnlockReply,
    },
}

/// What a [`WaitRequest`] asks the server for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitMode {
    /// `pg_advisory_lock` (fenced when the manager fences).
    Exclusive,
    /// `pg_advisory_lock_shared`, queued like any other request.
    Shared,
    /// `pg_try_advisory_lock_shared`: one attempt, never queued.
    TryShared,
}

/// One blocking wait for a lock id, on behalf of a key's wait line.
pub(crate) struct WaitRequest {
    pub(crate) lock_id: i64,
    pub(crate) key: Arc<str>,
    pub(crate) mode: WaitMode,
    /// Ends the wait on the server; `None` waits until granted or abandoned.
    pub(crate) lock_timeout: Option<Duration>,
    /// Cancelled when nobody wants the lock any more: the wait is cancelled
    /// on the server and a grant that raced it is given back.
    pub(crate) abandon: CancellationToken,
    /// The wait's place among the manager's dedicated sessions; the actor
    /// takes it and keeps it while the session holds the granted lock.
    pub(crate) permit: Option<OwnedSemaphorePermit>,
    /// The wait's seat among its key's dedicated sessions (a wait line's
    /// wait only), kept like `permit` and given back once the session is
    /// parked again.
    pub(crate) seat: Option<OwnedSemaphorePermit>,
    pub(crate) reply: oneshot::Sender<WaitOutcome>,
}

/// How a wait ended. The session's state is established in every case: it
/// holds the lock exactly when the outcome is `Granted`.
pub(crate) enum WaitOutcome {
    Granted(Granted),
    /// The server's `lock_timeout` ended it.
    TimedOut,
    /// The line abandoned it (nobody waits any more); nothing is held.
    Abandoned,
    /// Someone else cancelled it on the server (`pg_cancel_backend`, a
    /// server-side `statement_timeout`).
    Cancelled(String),
    Failed(BackendError),
}

/// A lock just granted.
pub(crate) struct Granted {
    pub(crate) lock: HeldLock,
    /// Raised when the session ends: the guard's loss signal watches it
    /// and `loss`.
    pub(crate) dead: Arc<SessionEnd>,
    /// The lock's own alarm, kept by the book too: raised when
    /// `release_all` takes the lock away.
    pub(crate) loss: Arc<Alarm>,
    /// Granted after a wait in the server's queue (not by a try).
    pub(crate) waited: bool,
    /// The session's lease, which the loss signal also watches; without a
    /// lease, the bound of the server's TCP timeouts (which loses nothing:
    /// [`LeaseClock::bound`](crate::ports::loss::LeaseClock::bound)).
    pub(crate) lease: Option<Arc<crate::ports::loss::LeaseClock>>,
    /// The fencing token, when the manager fences (never for shared holds).
    pub(crate) fence: Option<u64>,
    pub(crate) mode: LockMode,
    pub(crate) acquired_at: DateTime<Utc>,
}

/// The sending side of a session, shared by its handles and its locks.
pub(crate) struct Mailbox {
    queue: Arc<Queue<Op>>,
    pub(super) dead: Arc<SessionEnd>,
    pid: AtomicI32,
    /// Why the session ended, for the loss metric (a `LossCause`).
    loss_cause: std::sync::atomic::AtomicU8,
    /// Why the session could not be opened, kept for callers whose request
    /// arrived after the actor had already given up.
    open_error: Mutex<Option<BackendError>>,
    /// How many locks the session holds now (where new work should go).
    held: std::sync::atomic::AtomicUsize,
    /// The session's work (actor and connection), polled by its task or
    /// by a caller waiting for an answer.
    pub(super) work: Arc<CoPolled>,
    /// The manager's close, raised when it is closed or dropped.
    manager_closed: Arc<Alarm>,
}

impl Mailbox {
    /// A mailbox for a session of the manager whose close is `manager_closed`.
    pub(super) fn new(manager_closed: Arc<Alarm>) -> (Arc<Self>, Receiver<Op>) {
        let (queue, rx) = queue();
        let mailbox = Arc::new(Self {
            queue,
            dead: SessionEnd::new(),
            pid: AtomicI32::new(0),
            loss_cause: std::sync::atomic::AtomicU8::new(0),
            open_error: Mutex::new(None),
            held: Default::default(),
            work: CoPolled::new(),
            manager_closed,
        });
        (mailbox, rx)
    }

    pub(super) fn pid(&self) -> i32 {
        self.pid.load(Ordering::Relaxed)
    }

    /// Records how many locks the session holds.
    pub(super) fn set_held(&self, n: usize) {
        self.held.store(n, Ordering::Relaxed);
    }

    /// Ends the session for `cause` (its locks are lost).
    pub(super) fn end(&self, cause: LossCause) {
        self.loss_cause.store(cause as u8, Ordering::Relaxed);
        match cause.loss_reason() {
            Some(why) => self.dead.raise_because(why),
            None => self.dead.raise(),
        }
    }

    /// Notes the server's own words when `e`, which ends the session, came
    /// from the server (`pg_terminate_backend`'s 57P01, a crash's 57P02):
    /// the holders' loss signals give it as the reason.
    pub(super) fn server_ended(&self, e: &tokio_postgres::Error) {
        if !crate::adapters::postgres::connection::connect::ends_session(e) {
            return;
        }
        if let Some(db) = e.as_db_error() {
            self.dead.note_why(format!(
                "the server ended the session holding the lock: {} (SQLSTATE {})",
                db.message(),
                db.code().code()
            ));
        }
    }

    /// The session's connection ended with `end`: when the operating
    /// system gave up on it (the server stopped acknowledging it), that is
    /// the cause, unless the session had already ended for another. Ends
    /// the session either way.
    pub(super) fn connection_ended(&self, end: Result<(), &tokio_postgres::Error>) {
        match end {
            Err(e) if !self.dead.is_raised() && timed_out(e) => {
                tracing::warn!(
                    pid = self.pid(),
                    error = %with_causes(e),
                    "lock session's connection timed out; its locks count as lost"
                );
                self.end(LossCause::TimedOut);
            }
            Err(e) => {
                tracing::debug!(error = %e, "lock session connection ended with an error");
                self.server_ended(e);
                if e.as_db_error().is_none() && !e.is_closed() {
                    self.dead.note_why(format!(
                        "the connection of the session holding the lock failed: {}",
                        with_causes(e)
                    ));
                }
                self.dead.raise();
            }
            Ok(()) => self.dead.raise(),
        }
    }

    pub(super) fn loss_cause(&self) -> LossCause {
        LossCause::from_u8(self.loss_cause.load(Ordering::Relaxed))
    }

    pub(super) fn set_pid(&self, pid: i32) {
        self.pid.store(pid, Ordering::Relaxed);
    }

    /// Whether the session ended for a reason recorded as its open error
    /// (it could not be opened, or a pooler sent its statements elsewhere).
    pub(super) fn has_open_error(&self) -> bool {
        self.open_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    pub(super) fn set_open_error(&self, e: &BackendError) {
        *self.open_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone_shallow());
    }
}

impl UnlockSink for Mailbox {
    fn send_unlock(&self, lock_id: i64, token: HoldToken, reply: Option<UnlockReply>) -> bool {
        self.queue
            .send(Op::Unlock {
                lock_id,
                token,
                reply,
            })
            .is_ok()
    }

    fn help(&self) -> Arc<CoPolled> {
        self.work.clone()
    }

    fn send_downgrade(&self, lock_id: i64, token: HoldToken, reply: UnlockReply) -> bool {
        self.queue
            .send(Op::Downgrade {
                lock_id,
                token,
                reply,
            })
            .is_ok()
    }

    fn has_ended(&self) -> bool {
        self.dead.is_raised()
    }

    fn ended_why(&self) -> Option<&str> {
        self.dead.why()
    }

    fn manager_closed(&self) -> bool {
        self.manager_closed.is_raised()
    }
}

/// The error of a request whose session ended before it was answered (or
/// before it could be sent): the one way it is worded.
pub(crate) fn session_ended() -> BackendError {
    BackendError::new(BackendErrorKind::Closed, "the lock session ended")
}

/// What the requests of a statement the server did not answer are told
/// (the session is given up for silence).
pub(crate) fn statement_unanswered() -> BackendError {
    BackendError::new(
        BackendErrorKind::NoAnswer,
        "the server did not answer the lock session's statement in time",
    )
}

/// Sends `op` to the session `pick` gives; if that one has ended, once more
/// to the one `pick` gives next (a session that died between a caller's
/// look and its send is replaced once). Returns the session that took it,
/// or why the last one could not: its open error, else [`session_ended`].
pub(crate) fn send_to(
    mut op: Op,
    mut pick: impl FnMut() -> SessionHandle,
) -> Result<SessionHandle, BackendError> {
    let mut last = None;
    for _ in 0..2 {
        let session = pick();
        match session.send(op) {
            Ok(()) => return Ok(session),
            Err(back) => {
                op = back;
                last = Some(session);
            }
        }
    }
    Err(last.map_or_else(session_ended, |s| s.send_failure()))
}

/// A cheap handle on a session actor.
#[derive(Clone)]
pub(crate) struct SessionHandle(pub(super) Arc<Mailbox>);

impl SessionHandle {
    /// Sends `op`, giving it back if the actor is gone.
    pub(crate) fn send(&self, op: Op) -> Result<(), Op> {
        self.0.queue.send(op)
    }

    /// Waits for the answer to a request sent to this session, running the
    /// session's work in the caller's task while nobody else does.
    ///
    /// # Cancel safety
    ///
    /// Dropping it loses nothing but the answer: the request stays with the
    /// session, whose own task goes on with it.
    pub(crate) fn help<R: std::future::Future + Unpin>(&self, reply: R) -> Helping<R> {
        self.0.work.clone().help(reply)
    }

    /// Why a request could not be sent to this session: why it could not
    /// be opened, else that it ended.
    pub(crate) fn send_failure(&self) -> BackendError {
        self.open_error().unwrap_or_else(session_ended)
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.0.dead.is_raised() || self.0.queue.is_closed()
    }

    /// Why the session could not be opened, if that is how it ended.
    pub(crate) fn open_error(&self) -> Option<BackendError> {
        let slot = self.0.open_error.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(BackendError::clone_shallow)
    }

    /// The server process id of the session (0 until connected).
    pub(crate) fn pid(&self) -> i32 {
        self.0.pid()
    }

    /// How many locks the session holds now.
    pub(crate) fn held(&self) -> usize {
        self.0.held.load(Ordering::Relaxed)
    }
}
