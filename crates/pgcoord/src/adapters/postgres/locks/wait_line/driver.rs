//! Serving one wait line: a wait at a time in PostgreSQL for whoever is
//! still in the line, each task's deadline kept, the server-side wait
//! abandoned once nobody is left.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::session::{self, WaitMode, WaitOutcome, WaitRequest};
use super::WaitLines;
use crate::ports::error::AcquireFailure;

/// How long a server-side wait nobody wants any more is left to end by its
/// own `lock_timeout` before it is cancelled: a cancel request costs a
/// connection to the postmaster and, when it races the end of the wait,
/// the session.
pub(super) const LET_SERVER_TIME_OUT: Duration = Duration::from_millis(50);

impl WaitLines {
    /// Ends the wait of every task whose deadline has passed with a
    /// timeout: the key's try-lock answered "held", and the line's wait had
    /// not been granted in time.
    fn expire(&self, lock_id: i64) {
        let now = Instant::now();
        let mut lines = self.lock();
        let Some(line) = lines.get_mut(&lock_id) else {
            return;
        };
        line.waiters.retain_mut(|w| {
            if w.deadline.is_some_and(|d| d <= now) {
                let failure = AcquireFailure::Timeout;
                let tx = std::mem::replace(&mut w.tx, oneshot::channel().0);
                let _ = tx.send(Err(failure));
                false
            } else {
                true
            }
        });
    }

    /// Runs `work` while ending the waits of tasks whose deadlines pass;
    /// `None` once nobody waits any more (or the manager closes).
    async fn while_waited<F: Future>(
        &self,
        lock_id: i64,
        changed: &Notify,
        work: F,
    ) -> Option<F::Output> {
        tokio::pin!(work);
        loop {
            let next = self.earliest_deadline(lock_id);
            tokio::select! {
                biased;
                out = &mut work => return Some(out),
                _ = self.until_nobody_waits(lock_id, changed) => return None,
                _ = sleep_until(next) => self.expire(lock_id),
            }
        }
    }

    /// Serves the line until nobody is left in it.
    pub(super) async fn drive(self: Arc<Self>, lock_id: i64, key: Arc<str>, changed: Arc<Notify>) {
        let seats = self.seats.of(lock_id);
        self.serve(lock_id, &key, &changed, &seats).await;
        drop(seats);
        self.seats.line_ended(lock_id);
    }

    async fn serve(&self, lock_id: i64, key: &Arc<str>, changed: &Notify, seats: &Arc<Semaphore>) {
        while let Some(lock_timeout) = self.next_wait(lock_id) {
            // A queued wait takes a place in the server's lock table: it
            // counts against the budget like a held lock.
            let Ok(_slot) = self.ctx.holdings.reserve_wait() else {
                let limit = self.ctx.holdings.budget();
                self.fail(lock_id, true, || AcquireFailure::BudgetExceeded { limit });
                continue;
            };
            // One of the key's two sessions (see `seats.rs`): with both
            // busy, the wait waits for one to be parked instead of opening
            // a third.
            let seat = seats.clone().acquire_owned();
            let Some(Ok(seat)) = self.while_waited(lock_id, changed, seat).await else {
                continue; // nobody waits any more (the seats never close)
            };
            let permits = self.pool.permits.clone();
            let acquire = permits.acquire_owned();
            let Some(permit) = self.while_waited(lock_id, changed, acquire).await else {
                continue;
            };
            let Ok(permit) = permit else {
                self.fail(lock_id, true, || AcquireFailure::ManagerClosed);
                continue;
            };
            let abandon = CancellationToken::new();
            let (tx, mut rx) = oneshot::channel();
            let request = WaitRequest {
                lock_id,
                key: key.clone(),
                mode: WaitMode::Exclusive,
                lock_timeout,
                abandon: abandon.clone(),
                permit: Some(permit),
                seat: Some(seat),
                reply: tx,
            };
            if let Err(open_error) = session::send_dedicated(&self.ctx, &self.pool, request) {
                self.fail(lock_id, true, || {
                    AcquireFailure::Backend(open_error.clone_shallow())
                });
                continue;
            }
            let server_gives_up = lock_timeout.map(|t| Instant::now() + t);
            let outcome = match self.while_waited(lock_id, changed, &mut rx).await {
                Some(outcome) => outcome,
                None => {
                    // Nobody wants the lock any more. A wait the server ends
                    // by itself very soon is left to; any other is cancelled.
                    let soon = Instant::now() + LET_SERVER_TIME_OUT;
                    match server_gives_up {
                        Some(at) if at <= soon => {
                            tokio::select! {
                                outcome = &mut rx => outcome,
                                _ = tokio::time::sleep_until(soon) => {
                                    abandon.cancel();
                                    rx.await
                                }
                            }
                        }
                        _ => {
                            abandon.cancel();
                            rx.await
                        }
                    }
                }
            };
            match outcome {
                Ok(WaitOutcome::Granted(g)) => self.deliver(lock_id, g),
                // Waiters with deadlines leave by themselves; the rest (and
                // any that joined while a wait was being abandoned) wait on.
                Ok(WaitOutcome::TimedOut | WaitOutcome::Abandoned) => {}
                Ok(WaitOutcome::Cancelled(reason)) => {
                    self.fail(lock_id, false, || AcquireFailure::Cancelled {
                        reason: reason.clone(),
                    })
                }
                Ok(WaitOutcome::Failed(e)) => {
                    self.fail(lock_id, true, || AcquireFailure::Backend(e.clone_shallow()))
                }
                Err(_) => self.fail(lock_id, true, || {
                    AcquireFailure::Backend(session::session_ended())
                }),
            }
        }
    }

    /// Resolves once no task waits in the line any more (or the manager closes).
    async fn until_nobody_waits(&self, lock_id: i64, changed: &Notify) {
        loop {
            if !self.anyone_waiting(lock_id) || self.ctx.closed.is_raised() {
                return;
            }
            tokio::select! {
                _ = changed.notified() => {}
                _ = self.ctx.closed.raised() => {}
            }
        }
    }
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
