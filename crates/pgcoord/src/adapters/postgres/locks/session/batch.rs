//! Shared sessions: try-locks and unlocks of many owners in one statement.

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::super::fencing::fence_query_error;
use super::super::held_lock::SessionRef;
use super::super::holdings::Removed;
use super::super::metrics::LossCause;
use super::super::silence::answer_within;
use super::answer::{self, Kind};
use super::batch_buffers::{BatchBuffers, PendingLock, PendingUnlock};
use super::batch_form::{batch_item, outcomes};
use super::claim::{ended_by_pooler, not_its_connection};
use super::downgrade::unlock_shared;
use super::liveness::connection_timed_out;
use super::mailbox::{session_ended, statement_unanswered, Op};
use super::reconcile::reconcile;
use super::state::{GrantTime, SessionState};
use crate::adapters::postgres::connection::connect::{ends_session, pg_error};
use crate::ports::alarm::Alarm;
use crate::ports::error::{BackendError, BackendErrorKind};

/// Runs the try-locks and unlocks in `buf.ops` in one statement.
pub(super) async fn run_batch(s: &mut SessionState, buf: &mut BatchBuffers) {
    let BatchBuffers {
        ops,
        locks,
        unlocks,
        ids,
        is_lock,
        items,
        results,
        removed,
    } = buf;
    // Unlocks of shared-mode holds run on their own (rare: a dedicated
    // session's one hold, or a downgraded lock).
    let mut shared_unlocks = Vec::new();
    for op in ops.drain(..) {
        match op {
            Op::TryLock { res, key, reply } => {
                if reply.is_closed() {
                    continue; // the caller left before we started: nothing to undo
                }
                locks.push(PendingLock {
                    res,
                    key,
                    reply,
                    loss: None,
                    token: None,
                });
            }
            Op::Unlock {
                lock_id,
                token,
                reply,
            } => {
                if s.held.get(&lock_id) != Some(&token.into()) {
                    // Already released (release_all) or never ours.
                    s.ctx.finish(lock_id, token);
                    if let Some(r) = reply {
                        let _ = r.send(Ok(false));
                    }
                    continue;
                }
                let unlock = PendingUnlock {
                    lock_id,
                    token,
                    reply,
                };
                match s.shared_mode.contains(&lock_id) {
                    true => shared_unlocks.push(unlock),
                    false => unlocks.push(unlock),
                }
            }
            Op::Wait(_) | Op::Holders { .. } | Op::TryAny { .. } | Op::Downgrade { .. } => {
                unreachable!("the actor runs waits and queries outside batches")
            }
        }
    }
    for u in shared_unlocks {
        unlock_shared(s, u.lock_id, u.token, u.reply).await;
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
    if s.statements.fenced.is_none() && ids.len() > 1 {
        items.extend(
            ids.iter()
                .zip(is_lock.iter())
                .map(|(&id, &l)| batch_item(id, l)),
        );
    }
    super::super::metrics::batch(ids.len());
    let sent = std::time::Instant::now();
    let outcome = {
        let limit = s.ctx.settings.liveness_timeout.max(Duration::from_secs(5));
        answer_within(limit, query(s, locks, ids, is_lock, items, results)).await
    };
    let mut ended_by = session_ended as fn() -> BackendError;
    // Ended because a statement reached a server connection not its own.
    let mut pooler = false;
    let answered = match outcome {
        // A session already known to be over grants nothing: its locks are
        // going with it.
        Ok(Ok(_)) if s.dead().is_raised() => false,
        Ok(Ok(false)) => {
            ended_by_pooler(&s.mailbox, "batch");
            (ended_by, pooler) = (not_its_connection, true);
            false
        }
        Ok(Ok(true)) if results.len() == ids.len() => {
            s.confirmed(sent);
            true
        }
        Ok(Ok(true)) => false,
        Ok(Err(e)) if ends_session(&e) => {
            s.mailbox.server_ended(&e);
            false
        }
        Ok(Err(e)) if super::claim::mixed_statements(&e) => {
            ended_by_pooler(&s.mailbox, "batch (another client's prepared statements)");
            (ended_by, pooler) = (not_its_connection, true);
            false
        }
        Ok(Err(e)) => {
            // A lone fenced try whose increment met a fence row still locked
            // by an older holder's protected write (see `TRY_ONE_FENCED`):
            // the key is busy, not broken. What the statement took is given
            // back below like any failed try's.
            let busy_row = s.statements.fenced.is_some()
                && locks.len() == 1
                && unlocks.is_empty()
                && e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE);
            let err = match s.statements.fenced {
                Some(_) => fence_query_error(e),
                None => pg_error(e, BackendErrorKind::Query),
            };
            if busy_row {
                tracing::debug!("fence row busy with a protected write; giving the try back");
            } else if locks.is_empty() {
                // Only unlocks: no caller is told the error, so it is logged.
                tracing::warn!(error = %err, size = ids.len(), "lock batch failed; reconciling");
            } else {
                // The acquisitions report it; a warning would say it twice.
                tracing::debug!(error = %err, size = ids.len(), "lock batch failed; reconciling");
            }
            if let Some(done) = reconcile(s, ids, is_lock).await {
                // Failed try-locks report the error; unlocks what the server says.
                let n = locks.len();
                for l in locks.drain(..) {
                    drop(l.res);
                    let answer = if busy_row {
                        Ok(None)
                    } else {
                        Err(err.clone_shallow())
                    };
                    let _ = l.reply.send(answer);
                }
                for (u, ok) in unlocks.drain(..).zip(done.into_iter().skip(n)) {
                    s.settle_unlock(u.lock_id, u.token, ok, u.reply);
                }
                return;
            }
            false
        }
        Err(_) => {
            tracing::warn!(
                size = ids.len(),
                "lock batch got no answer in time; closing the session"
            );
            // Silence, not an end the server chose: what is still queued
            // is told so too (`actor::ended_error`).
            s.mailbox.end(LossCause::LivenessFailed);
            ended_by = statement_unanswered;
            false
        }
    };
    if !answered {
        // The session is gone, and its locks with it; but for a pooler's:
        // the unlocks ran nowhere, and what they were to give back may
        // stay held on the server connection it was granted on, which the
        // release is told (not "lost").
        s.dead().raise();
        if s.mailbox.loss_cause() == LossCause::TimedOut {
            ended_by = connection_timed_out;
        }
        for l in locks.drain(..) {
            drop(l.res);
            let _ = l.reply.send(Err(ended_by()));
        }
        for u in unlocks.drain(..) {
            match u.reply {
                Some(reply) if pooler => {
                    s.settle_unlock(u.lock_id, u.token, false, None);
                    let _ = reply.send(Err(ended_by()));
                }
                reply => s.settle_unlock(u.lock_id, u.token, false, reply),
            }
        }
        return;
    }
    record(s, locks, unlocks, removed, results);
}

/// Records a batch's answer: the grants, the failed tries and the unlocks
/// go into the book under one take of its mutex, then the callers are
/// answered (outside it: a grant whose caller left is dropped, and that
/// releases it through the book).
fn record(
    s: &mut SessionState,
    locks: &mut Vec<PendingLock>,
    unlocks: &mut Vec<PendingUnlock>,
    removed: &mut Removed,
    results: &[(bool, Option<u64>)],
) {
    let (lock_results, unlock_results) = results.split_at(locks.len());
    // Made before the mutex is taken, so that no allocation runs under it.
    for (l, (ok, _)) in locks.iter_mut().zip(lock_results) {
        l.loss = ok.then(Alarm::new);
    }
    let time = GrantTime::now();
    let session: SessionRef = s.mailbox.clone();
    {
        let mut book = s.ctx.holdings.batch(removed);
        for l in locks.iter_mut() {
            match &l.loss {
                Some(loss) => {
                    l.token = Some(book.grant_reserved(&mut l.res, &session, time.at, loss.clone()))
                }
                None => book.unreserve(&mut l.res),
            }
        }
        for u in unlocks.iter() {
            book.finish(u.lock_id, u.token);
        }
    }
    for (l, (_, fence)) in locks.drain(..).zip(lock_results) {
        let (Some(token), Some(loss)) = (l.token, l.loss) else {
            let _ = l.reply.send(Ok(None));
            continue;
        };
        let lock_id = l.res.lock_id();
        let g = s.granted(lock_id, token, l.key, loss, *fence, time, false);
        if let Err(Ok(Some(g))) = l.reply.send(Ok(Some(g))) {
            drop(g); // the caller left while we worked: dropping releases it
        }
    }
    for (u, (ok, _)) in unlocks.drain(..).zip(unlock_results) {
        s.unlocked(u.lock_id, *ok, u.reply);
    }
}

/// The batch's one statement: per item, whether it succeeded and (fenced
/// grants) the new fencing token, into `out` (empty when called); `false`
/// when it reached a server connection this session did not claim, where
/// it did nothing (`claim.rs`). `items`
/// is `ids` and `is_lock` as [`batch_item`]s, for an unfenced batch of
/// more than one.
async fn query(
    s: &SessionState,
    locks: &[PendingLock],
    ids: &[i64],
    is_lock: &[bool],
    items: &[i64],
    out: &mut Vec<(bool, Option<u64>)>,
) -> Result<bool, tokio_postgres::Error> {
    let (client, st) = (&s.client, &s.statements);
    let tag = &st.tag;
    match (&st.fenced, ids.len()) {
        // An unlock is the same fenced or not.
        (Some(_), 1) if !is_lock[0] => {
            let stamp = st.stamps.next(Kind::UnlockOne);
            let params: [&(dyn ToSql + Sync); 3] = [&ids[0], tag, &stamp.sent];
            let Some(row) = answer::one(client, &st.unlock_one, &params, stamp).await? else {
                return Ok(false);
            };
            out.push((row.get(0), None));
            return Ok(true);
        }
        (Some(fenced), 1) => {
            let key: &str = &locks[0].key;
            let stamp = st.stamps.next(Kind::TryOneFenced);
            let params: [&(dyn ToSql + Sync); 5] =
                [&ids[0], &key, &fenced.first_token, tag, &stamp.sent];
            let Some(row) = answer::one(client, &fenced.try_one, &params, stamp).await? else {
                return Ok(false);
            };
            let fence = row.get::<_, Option<i64>>(1).map(|f| f as u64);
            out.push((row.get(0), fence));
            return Ok(true);
        }
        _ => {}
    }
    if let Some(fenced) = &st.fenced {
        let keys: Vec<&str> = locks
            .iter()
            .map(|l| &*l.key)
            .chain(std::iter::repeat_n("", ids.len() - locks.len()))
            .collect();
        let stamp = st.stamps.next(Kind::BatchFenced);
        let params: [&(dyn ToSql + Sync); 6] =
            [&ids, &is_lock, &keys, &fenced.first_token, tag, &stamp.sent];
        let Some(rows) = answer::rows(client, &fenced.batch, &params, stamp).await? else {
            return Ok(false);
        };
        out.extend(
            rows.iter()
                .map(|r| (r.get(0), r.get::<_, Option<i64>>(1).map(|f| f as u64))),
        );
        return Ok(true);
    }
    if ids.len() == 1 {
        let (stmt, stamp) = if is_lock[0] {
            (&st.try_one, st.stamps.next(Kind::TryOne))
        } else {
            (&st.unlock_one, st.stamps.next(Kind::UnlockOne))
        };
        let params: [&(dyn ToSql + Sync); 3] = [&ids[0], tag, &stamp.sent];
        let Some(row) = answer::one(client, stmt, &params, stamp).await? else {
            return Ok(false);
        };
        out.push((row.get(0), None));
        return Ok(true);
    }
    let stamp = st.stamps.next(Kind::Batch);
    let params: [&(dyn ToSql + Sync); 3] = [&items, tag, &stamp.sent];
    let Some(row) = answer::one(client, &st.batch, &params, stamp).await? else {
        return Ok(false);
    };
    let failed: Option<Vec<i64>> = row.get(0);
    outcomes(ids.len(), &failed.unwrap_or_default(), out);
    Ok(true)
}
