//! Shared-mode acquisition: each shared hold on a session of its own.
//!
//! Shared holds do not use the batched sessions' batches or the wait lines:
//! a session that already holds a key shared would be granted it again at
//! once (re-entrancy), even past a queued writer, so that local readers
//! could starve writers of other processes. Instead every shared hold (or
//! wait for one) runs on a dedicated session that holds nothing else, and
//! PostgreSQL orders every request of both modes, local ones included: a
//! reader queues behind a writer that came first, and a shared try fails
//! while a writer waits. The cost is a connection per shared hold, within
//! `max_wait_sessions`. A single-session manager uses its one session.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{alive, wait_reply, Acquirer};
use crate::adapters::postgres::locks::metrics::WaitingTask;
use crate::adapters::postgres::locks::session::{self, Granted, Op, WaitMode, WaitRequest};
use crate::ports::deadline::deadline_in;
use crate::ports::error::AcquireFailure;

impl Acquirer {
    /// A shared hold of `lock_id`, waiting up to `timeout` (`Some(ZERO)`:
    /// one try, never queued).
    pub(crate) async fn acquire_shared(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        timeout: Option<Duration>,
    ) -> Result<Granted, AcquireFailure> {
        if self.ctx.closed.is_raised() {
            return Err(AcquireFailure::ManagerClosed);
        }
        let single = self.ctx.settings.single_session;
        if single && self.ctx.holdings.held() > 0 {
            let limit = self.ctx.holdings.budget();
            return Err(AcquireFailure::BudgetExceeded { limit });
        }
        let deadline = deadline_in(timeout);
        let try_only = timeout == Some(Duration::ZERO);
        // A queued shared request takes a place in the server's lock table.
        let Ok(_slot) = self.ctx.holdings.reserve_wait() else {
            let limit = self.ctx.holdings.budget();
            return Err(AcquireFailure::BudgetExceeded { limit });
        };
        let _waiting = (!try_only).then(|| (WaitingTask::start(), Waiting::start(self)));
        let abandon = CancellationToken::new();
        // Dropped with this future: the wait is abandoned on the session.
        let _abandon_on_drop = abandon.clone().drop_guard();
        let (tx, rx) = oneshot::channel();
        let mut request = WaitRequest {
            lock_id,
            key: key.clone(),
            mode: if try_only {
                WaitMode::TryShared
            } else {
                WaitMode::Shared
            },
            lock_timeout: deadline.map(|d| {
                d.saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            }),
            abandon,
            permit: None,
            seat: None,
            reply: tx,
        };
        if single {
            let session = self.open_batched(0);
            if session.send(Op::Wait(request)).is_err() {
                let e = session.send_failure();
                return Err(AcquireFailure::Backend(e));
            }
        } else {
            request.permit = Some(self.session_permit(deadline, try_only).await?);
            session::send_dedicated(&self.ctx, &self.pool, request)
                .map_err(AcquireFailure::Backend)?;
        }
        alive(wait_reply(rx, deadline, self.ctx.settings.liveness_timeout).await?)
    }

    /// A place among the manager's dedicated sessions, within the deadline
    /// (a try takes one only if one is free now).
    async fn session_permit(
        &self,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, AcquireFailure> {
        let permits = self.pool.permits.clone();
        // Not the key's doing: the manager's own sessions are all in use.
        let busy = || AcquireFailure::WaitSessionsBusy {
            limit: self.ctx.settings.max_wait_sessions,
        };
        if try_only {
            return permits.try_acquire_owned().map_err(|_| busy());
        }
        let acquire = permits.acquire_owned();
        let permit = match deadline {
            Some(d) => tokio::time::timeout_at(d, acquire)
                .await
                .map_err(|_| busy())?,
            None => acquire.await,
        };
        permit.map_err(|_| AcquireFailure::ManagerClosed)
    }
}

/// Counts a task waiting for a shared hold while it lives.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Waiting<'a> {
    fn start(acquirer: &'a Acquirer) -> Self {
        let count = &acquirer.shared_waiting;
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
