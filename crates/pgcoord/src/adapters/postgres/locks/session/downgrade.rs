//! Shared-mode work of a session that is not a blocking wait: the
//! one-attempt shared try (on a dedicated session, or the one session of a
//! single-session manager) and the downgrade of an exclusive lock the
//! session holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio_postgres::types::ToSql;

use super::super::held_lock::UnlockReply;
use super::super::hold_token::HoldToken;
use super::super::silence::answer_within;
use super::answer::{self, Kind};
use super::claim::not_its_connection;
use super::mailbox::{session_ended, WaitOutcome};
use super::state::SessionState;
use crate::adapters::postgres::connection::connect::{ends_session, pg_error};
use crate::ports::error::{BackendError, BackendErrorKind};

/// How long a statement here may take before the session counts as gone.
fn answer_limit(s: &SessionState) -> Duration {
    s.ctx.settings.liveness_timeout.max(Duration::from_secs(1))
}

/// `pg_try_advisory_lock_shared` once; false when the session must not be
/// reused. Not granted is [`WaitOutcome::TimedOut`], as for a wait.
pub(super) async fn run_try_shared(
    s: &mut SessionState,
    lock_id: i64,
    key: Arc<str>,
    reply: oneshot::Sender<WaitOutcome>,
) -> bool {
    let sent = Instant::now();
    let stamp = s.statements.stamps.next(Kind::TryShared);
    let params: [&(dyn ToSql + Sync); 3] = [&lock_id, &s.statements.tag, &stamp.sent];
    let query = answer::one(&s.client, &s.statements.try_shared, &params, stamp);
    match answer_within(answer_limit(s), query).await {
        Ok(Ok(None)) => {
            s.dead().raise();
            let _ = reply.send(WaitOutcome::Failed(not_its_connection()));
            false
        }
        Ok(Ok(Some(row))) => {
            s.confirmed(sent);
            if !row.get::<_, bool>(0) {
                let _ = reply.send(WaitOutcome::TimedOut);
                return true;
            }
            if s.dead().is_raised() {
                let _ = reply.send(WaitOutcome::Failed(session_ended()));
                return false;
            }
            if reply.is_closed() {
                // Nobody wants it any more: the session holds nothing else.
                let ok = s.unlock_all().await;
                let _ = reply.send(WaitOutcome::Abandoned);
                return ok;
            }
            let g = s.grant_reader(lock_id, key, false);
            if let Err(WaitOutcome::Granted(g)) = reply.send(WaitOutcome::Granted(g)) {
                drop(g); // the caller left after all: the unlock is queued to us
            }
            true
        }
        Ok(Err(e)) if ends_session(&e) => {
            s.dead().raise();
            let _ = reply.send(WaitOutcome::Failed(s.ended_by(e)));
            false
        }
        Ok(Err(e)) => {
            let ok = s.unlock_all().await;
            let _ = reply.send(WaitOutcome::Failed(pg_error(e, BackendErrorKind::Query)));
            ok
        }
        Err(_) => {
            s.dead().raise();
            let _ = reply.send(WaitOutcome::Failed(no_answer()));
            false
        }
    }
}

fn no_answer() -> BackendError {
    BackendError::new(
        BackendErrorKind::NoAnswer,
        "the server did not answer the shared try-lock",
    )
}

/// Turns the exclusive lock `token` holds into a shared hold on this
/// session, in one statement (shared taken, then exclusive given up).
/// Replies whether the lock was still held. Any failure closes the
/// session, which frees whatever it held: the guard then reports the loss.
pub(super) async fn run_downgrade(
    s: &mut SessionState,
    lock_id: i64,
    token: HoldToken,
    reply: UnlockReply,
) {
    if s.held.get(&lock_id) != Some(&token.into()) {
        let _ = reply.send(Ok(false));
        return;
    }
    if s.shared_mode.contains(&lock_id) {
        let _ = reply.send(Ok(true));
        return;
    }
    let sent = Instant::now();
    let stamp = s.statements.stamps.next(Kind::Downgrade);
    let params: [&(dyn ToSql + Sync); 3] = [&lock_id, &s.statements.tag, &stamp.sent];
    let query = answer::one(&s.client, &s.statements.downgrade, &params, stamp);
    match answer_within(answer_limit(s), query).await {
        Ok(Ok(None)) => {
            s.dead().raise();
            let _ = reply.send(Err(not_its_connection()));
        }
        Ok(Ok(Some(row))) if row.get::<_, bool>(0) && !s.dead().is_raised() => {
            s.confirmed(sent);
            s.shared_mode.insert(lock_id);
            let _ = reply.send(Ok(true));
        }
        Ok(Ok(_)) => {
            // The exclusive hold was not there to give up: the session's
            // state is not what the bookkeeping says. Close it.
            s.dead().raise();
            let _ = reply.send(Ok(false));
        }
        Ok(Err(e)) => {
            s.dead().raise();
            let _ = reply.send(Err(s.ended_by(e)));
        }
        Err(_) => {
            s.dead().raise();
            let _ = reply.send(Ok(false));
        }
    }
}

/// `pg_advisory_unlock_shared` of one shared-mode hold of a batched
/// session. A failure closes the session (which frees what it held).
pub(super) async fn unlock_shared(
    s: &mut SessionState,
    lock_id: i64,
    token: HoldToken,
    reply: Option<UnlockReply>,
) {
    let sent = Instant::now();
    let stamp = s.statements.stamps.next(Kind::UnlockShared);
    let params: [&(dyn ToSql + Sync); 3] = [&lock_id, &s.statements.tag, &stamp.sent];
    let query = answer::one(&s.client, &s.statements.unlock_shared, &params, stamp);
    let ok = match answer_within(answer_limit(s), query).await {
        Ok(Ok(Some(row))) if !s.dead().is_raised() => {
            s.confirmed(sent);
            row.get::<_, bool>(0)
        }
        _ => {
            s.dead().raise();
            false
        }
    };
    s.settle_unlock(lock_id, token, ok, reply);
}
