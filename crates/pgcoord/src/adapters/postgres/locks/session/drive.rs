//! Polls a session's connection inside its actor's task.
//!
//! A lock session used to take two task hops per statement: the caller's
//! request woke the actor, and the actor's statement woke tokio-postgres's
//! connection task (and its answer the way back). [`Driven`] polls the
//! connection future and the actor's work together in the one task, so a
//! statement the actor sends is written to the socket in the same poll, and
//! the server's answer reaches the actor without another task being woken.
//!
//! Wake-ups the two give each other while they are being polled are not
//! sent to the scheduler: they are noted and both are polled again at once
//! (up to [`MAX_ROUNDS`] times per poll, then the task yields as any other).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use tokio_util::sync::CancellationToken;

use crate::adapters::postgres::connection::connect::ConnectionFuture;

/// Rounds of polling per poll of the task before it yields to others.
const MAX_ROUNDS: usize = 16;

/// The actor's work and its session's connection, polled as one future.
///
/// When the connection ends first, `dead` is cancelled (the session is
/// over: every guard's loss signal fires) and the work goes on without it;
/// its statements then fail at once, as on any closed client. When the
/// work ends first (the actor has closed the session and dropped its
/// client), the connection is polled on until it has said goodbye.
pub(super) struct Driven<W> {
    connection: Option<ConnectionFuture>,
    work: Option<Pin<Box<W>>>,
    dead: CancellationToken,
    wakes: Arc<Wakes>,
    waker: Waker,
}

/// Whether either half was woken while the task polled them.
struct Wakes {
    polling: AtomicBool,
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if !self.polling.load(Ordering::SeqCst) {
            self.task.wake();
        }
    }
}

impl<W: Future<Output = ()>> Driven<W> {
    pub(super) fn new(connection: ConnectionFuture, work: W, dead: CancellationToken) -> Self {
        let wakes = Arc::new(Wakes {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
        });
        Self {
            connection: Some(connection),
            work: Some(Box::pin(work)),
            dead,
            waker: Waker::from(wakes.clone()),
            wakes,
        }
    }

    /// Polls the connection once; drops it (and ends the session) when it
    /// has ended.
    fn poll_connection(&mut self, cx: &mut Context<'_>) {
        let Some(connection) = self.connection.as_mut() else {
            return;
        };
        if let Poll::Ready(end) = connection.as_mut().poll(cx) {
            if let Err(e) = end {
                tracing::debug!(error = %e, "lock session connection ended with an error");
            }
            // Dropping it fails the client's statements in flight.
            self.connection = None;
            self.dead.cancel();
        }
    }

    /// One round: the connection (answers in), the work, the connection
    /// again (what the work just sent, out). True when all is done.
    fn round(&mut self) -> bool {
        let waker = self.waker.clone();
        let mut cx = Context::from_waker(&waker);
        self.poll_connection(&mut cx);
        if let Some(work) = self.work.as_mut() {
            if work.as_mut().poll(&mut cx).is_ready() {
                self.work = None;
            }
        }
        self.poll_connection(&mut cx);
        self.work.is_none() && self.connection.is_none()
    }
}

impl<W: Future<Output = ()>> Future for Driven<W> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.wakes.task.register(cx.waker());
        for _ in 0..MAX_ROUNDS {
            this.wakes.polling.store(true, Ordering::SeqCst);
            this.wakes.woken.store(false, Ordering::SeqCst);
            let done = this.round();
            this.wakes.polling.store(false, Ordering::SeqCst);
            if done {
                return Poll::Ready(());
            }
            if !this.wakes.woken.swap(false, Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        // Still busy: let the other tasks of this worker run first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
