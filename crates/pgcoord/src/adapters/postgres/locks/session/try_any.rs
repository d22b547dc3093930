//! Shared sessions: the first free lock of a list, in one statement (the
//! fast path of `try_lock_any`, used by semaphores for their slots).
//!
//! `LIMIT 1` over the ordinality scan stops at the first id whose try-lock
//! succeeds, so at most one lock is taken, and it is the first free one in
//! list order. Each candidate was reserved in the book first (ids this
//! manager holds or is taking are left out by the caller).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::types::ToSql;

use super::super::holdings::Reservation;
use super::super::silence::answer_within;
use super::answer::{self, Kind};
use super::claim::not_its_connection;
use super::mailbox::{session_ended, Granted, Reply};
use super::reconcile::held_ids;
use super::state::{GrantTime, SessionState};
use crate::adapters::postgres::connection::connect::{ends_session, pg_error};
use crate::ports::error::BackendErrorKind;

/// Tries the candidates in order; replies with the index of the one taken.
pub(super) async fn run_try_any(
    s: &mut SessionState,
    candidates: Vec<(Reservation, Arc<str>)>,
    reply: Reply<Option<(usize, Granted)>>,
) {
    if reply.is_closed() {
        return; // the caller left before we started: nothing to undo
    }
    let ids: Vec<i64> = candidates.iter().map(|(r, _)| r.lock_id()).collect();
    let sent = Instant::now();
    let limit = s.ctx.settings.liveness_timeout.max(Duration::from_secs(5));
    let stamp = s.statements.stamps.next(Kind::TryFirst);
    let params: [&(dyn ToSql + Sync); 3] = [&ids, &s.statements.tag, &stamp.sent];
    let query = answer::one(&s.client, &s.statements.try_first, &params, stamp);
    let outcome = answer_within(limit, query).await;
    let taken = match outcome {
        Ok(Ok(None)) => {
            // Another server connection's (nothing was tried there), or an
            // answer not this request's (`answer.rs`).
            s.dead().raise();
            let _ = reply.send(Err(not_its_connection()));
            return;
        }
        Ok(Ok(Some(row))) if !s.dead().is_raised() => {
            s.confirmed(sent);
            row.get::<_, Option<i64>>(0).map(|n| (n - 1) as usize)
        }
        Ok(Err(e)) if !ends_session(&e) => {
            // Session locks survive a statement error: give back whatever
            // this statement took, then report the error.
            if !give_back(s, &ids).await {
                s.dead().raise();
            }
            let _ = reply.send(Err(pg_error(e, BackendErrorKind::Query)));
            return;
        }
        _ => {
            // No answer, or the session is over: its locks go with it.
            s.dead().raise();
            let _ = reply.send(Err(session_ended()));
            return;
        }
    };
    let Some(index) = taken.filter(|i| *i < candidates.len()) else {
        let _ = reply.send(Ok(None));
        return;
    };
    let (res, key) = candidates.into_iter().nth(index).expect("index checked");
    let granted = s.grant(res.lock_id(), key, Some(res), None, GrantTime::now());
    if let Err(Ok(Some((_, g)))) = reply.send(Ok(Some((index, granted)))) {
        drop(g); // the caller left while we worked: dropping releases it
    }
}

/// Unlocks the candidates the server says this session holds but the
/// session's own book does not; false if that could not be established.
async fn give_back(s: &SessionState, ids: &[i64]) -> bool {
    let Some(on_server) = held_ids(s).await else {
        return false;
    };
    for id in ids {
        if !on_server.contains(id) || s.held.contains_key(id) {
            continue;
        }
        let stamp = s.statements.stamps.next(Kind::UnlockOne);
        let params: [&(dyn ToSql + Sync); 3] = [id, &s.statements.tag, &stamp.sent];
        let unlocked = answer::one(&s.client, &s.statements.unlock_one, &params, stamp).await;
        if !matches!(unlocked, Ok(Some(_))) {
            return false;
        }
    }
    true
}
