//! Polls a session's connection together with its actor's work.
//!
//! A lock session used to take two task hops per statement: the caller's
//! request woke the actor, and the actor's statement woke tokio-postgres's
//! connection task (and its answer the way back). [`Driven`] polls the
//! connection future and the actor's work as one future, so a statement
//! the actor sends is written to the socket in the same poll, and the
//! server's answer reaches the actor without another task being woken.
//! Who polls it is [`CoPolled`](super::super::co_poll::CoPolled)'s
//! business: the session's own task, or a caller waiting for an answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::mailbox::Mailbox;
use crate::adapters::postgres::connection::connect::ConnectionFuture;

/// The actor's work and its session's connection, polled as one future.
///
/// When the connection ends first, the mailbox is told (the session is
/// over: every guard's loss signal fires, and a connection that timed out
/// is the cause) and the work goes on without it;
/// its statements then fail at once, as on any closed client. When the
/// work ends first (the actor has closed the session and dropped its
/// client), the connection is polled on until it has said goodbye.
pub(super) struct Driven<W> {
    connection: Option<ConnectionFuture>,
    work: Option<Pin<Box<W>>>,
    mailbox: Arc<Mailbox>,
}

impl<W: Future<Output = ()>> Driven<W> {
    pub(super) fn new(connection: ConnectionFuture, work: W, mailbox: Arc<Mailbox>) -> Self {
        Self {
            connection: Some(connection),
            work: Some(Box::pin(work)),
            mailbox,
        }
    }

    /// Polls the connection once; drops it (and ends the session) when it
    /// has ended.
    fn poll_connection(&mut self, cx: &mut Context<'_>) {
        let Some(connection) = self.connection.as_mut() else {
            return;
        };
        if let Poll::Ready(end) = connection.as_mut().poll(cx) {
            // Recorded before the connection is dropped, which fails the
            // client's statements in flight: their callers are told why.
            self.mailbox.connection_ended(end.as_ref().map(|_| ()));
            self.connection = None;
        }
    }
}

impl<W: Future<Output = ()>> Future for Driven<W> {
    type Output = ();

    /// One round: the connection (answers in), the work, the connection
    /// again (what the work just sent, out). Wake-ups the halves give each
    /// other meanwhile are looped over by the poller.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.poll_connection(cx);
        if let Some(work) = this.work.as_mut() {
            if work.as_mut().poll(cx).is_ready() {
                this.work = None;
            }
        }
        this.poll_connection(cx);
        match this.work.is_none() && this.connection.is_none() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}
