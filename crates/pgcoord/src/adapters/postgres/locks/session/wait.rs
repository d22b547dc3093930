//! Dedicated sessions: one blocking `pg_advisory_lock` wait (for a shared
//! hold, a try first and the wait only if it fails: see `LOCK_SHARED`).
//!
//! The session's state is established after every wait, never assumed.
//! PostgreSQL can report `55P03` (lock_timeout) or `57014` (cancel) after
//! it has granted the lock, and a session-level lock survives the error; so
//! a wait that did not end in a grant is followed by
//! `pg_advisory_unlock_all()` (the session holds nothing else), and a grant
//! nobody wants any more is unlocked at once. Only then is the session
//! reused; if any step fails, it is closed.
//!
//! A wait nobody wants any more is cancelled with a cancel request. The
//! server delivers that request asynchronously, and a session that was sent
//! one is closed afterwards, however the wait ended: a cancel was seen
//! ending the next wait of a reused session even after the cancelled wait
//! had reported `57014`. (A wait left to end by its own `lock_timeout` is
//! not cancelled, and its session is reused.)

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::super::fencing::fence_query_error;
use super::super::silence::answer_within;
use super::answer::{self, Kind};
use super::claim::ended_by_pooler;
use super::mailbox::{session_ended, WaitMode, WaitOutcome, WaitRequest};
use super::state::{GrantTime, SessionState};
use crate::adapters::postgres::connection::connect::ends_session;

/// Runs one wait; false when the session must not be reused.
pub(super) async fn run_wait(s: &mut SessionState, req: WaitRequest) -> bool {
    let WaitRequest {
        lock_id,
        key,
        mode,
        lock_timeout,
        abandon,
        reply,
        ..
    } = req;
    if reply.is_closed() || abandon.is_cancelled() {
        let _ = reply.send(WaitOutcome::Abandoned);
        return true;
    }
    if mode == WaitMode::TryShared {
        return super::downgrade::run_try_shared(s, lock_id, key, reply).await;
    }
    let shared = mode == WaitMode::Shared;
    let liveness_timeout = s.ctx.settings.liveness_timeout;
    let outcome = {
        let (client, st) = (&s.client, &s.statements);
        let ms = lock_timeout.map(|t| t.as_millis().clamp(1, i32::MAX as u128).to_string());
        let wait = async {
            // Pipelined: [set lock_timeout], wait, then a trailing statement
            // (resetting lock_timeout, or a ping). The trailing statement is
            // what proves a grant: a backend being terminated can be granted
            // the lock, answer, and die on its next statement, releasing the
            // lock as it exits; its grant is then never reported.
            let zero = "0";
            let tag = &st.tag;
            let reset_stamp = st.stamps.next(Kind::SetLockTimeout);
            let reset: [&(dyn ToSql + Sync); 3] = [&zero, tag, &reset_stamp.sent];
            // Fenced: the wait and the key's fence increment, one statement.
            // A shared hold takes no fencing token. `None`: the statement
            // reached another server connection and did nothing (`claim.rs`).
            // A grant's (fence, whether the server made it wait): an
            // exclusive wait comes after a failed try, so it always waited.
            // `None` also when the answer read is not this request's
            // (`answer.rs`): no grant is believed that was not made here.
            let lock = async {
                match &st.fenced {
                    _ if shared => {
                        let stamp = st.stamps.next(Kind::LockShared);
                        let params: [&(dyn ToSql + Sync); 3] = [&lock_id, tag, &stamp.sent];
                        answer::one(client, &st.lock_shared, &params, stamp)
                            .await
                            .map(|row| row.map(|r| (None, r.get::<_, bool>(0))))
                    }
                    Some(f) => {
                        let stamp = st.stamps.next(Kind::LockFenced);
                        let params: [&(dyn ToSql + Sync); 5] =
                            [&lock_id, &&*key, &f.first_token, tag, &stamp.sent];
                        answer::one(client, &f.lock, &params, stamp)
                            .await
                            .map(|row| row.map(|r| (Some(r.get::<_, i64>(0) as u64), true)))
                    }
                    None => {
                        let stamp = st.stamps.next(Kind::Lock);
                        let params: [&(dyn ToSql + Sync); 3] = [&lock_id, tag, &stamp.sent];
                        answer::one(client, &st.lock, &params, stamp)
                            .await
                            .map(|row| row.map(|_| (None, true)))
                    }
                }
            };
            match &ms {
                Some(ms) => {
                    let set_stamp = st.stamps.next(Kind::SetLockTimeout);
                    let set: [&(dyn ToSql + Sync); 3] = [ms, tag, &set_stamp.sent];
                    let (set, lock, tail) = tokio::join!(
                        answer::one(client, &st.set_lock_timeout, &set, set_stamp),
                        lock,
                        answer::one(client, &st.set_lock_timeout, &reset, reset_stamp),
                    );
                    let elsewhere = matches!(set, Ok(None)) || matches!(tail, Ok(None));
                    (set.is_err(), elsewhere, lock, tail.map(drop))
                }
                None => {
                    let ping_stamp = st.stamps.next(Kind::Ping);
                    let ping: [&(dyn ToSql + Sync); 2] = [tag, &ping_stamp.sent];
                    let (lock, tail) =
                        tokio::join!(lock, answer::one(client, &st.ping, &ping, ping_stamp));
                    (false, matches!(tail, Ok(None)), lock, tail.map(drop))
                }
            }
        };
        tokio::pin!(wait);
        tokio::select! {
            // Polled first, so the statement is on the wire before we ever
            // consider cancelling it.
            biased;
            r = &mut wait => Some((false, r)),
            _ = abandon.cancelled() => {
                // Nobody waits any more: cancel on the server, then see how
                // the wait ended (a grant may have raced the cancel).
                s.ctx.connector.cancel(client.cancel_token()).await;
                answer_within(liveness_timeout, &mut wait).await.ok().map(|r| (true, r))
            }
        }
    };
    let Some((abandoned, (set_failed, elsewhere, lock, tail))) = outcome else {
        s.dead().raise(); // no answer to the cancel: state unknown
        let _ = reply.send(WaitOutcome::Abandoned);
        return false;
    };
    if elsewhere || matches!(lock, Ok(None)) {
        // A statement of the wait reached another server connection: this
        // session cannot hold locks where it is (`claim.rs`).
        s.dead().raise();
        let e = ended_by_pooler(&s.mailbox, "wait");
        let _ = reply.send(match abandoned {
            true => WaitOutcome::Abandoned,
            false => WaitOutcome::Failed(e),
        });
        return false;
    }
    let lock = lock.map(|granted| granted.unwrap_or((None, true)));
    if tail.is_err() {
        // The session did not outlive the wait (or lock_timeout may be left
        // set): whatever it was granted is gone with it, or goes now.
        s.dead().raise();
        let _ = reply.send(match lock {
            _ if abandoned => WaitOutcome::Abandoned,
            Err(e) => WaitOutcome::Failed(s.ended_by(e)),
            Ok(_) => WaitOutcome::Failed(session_ended()),
        });
        return false;
    }
    let config_failed = set_failed;
    if config_failed {
        // lock_timeout may be left set: never reuse.
        s.dead().raise();
    }
    if abandoned && !matches!(&lock, Err(e) if e.code() == Some(&SqlState::QUERY_CANCELED)) {
        // The wait ended some other way than by our cancel request, which
        // may still be on its way (the server signals the backend
        // asynchronously) and would cancel whatever runs next. Closing the
        // session settles it, and frees a grant that raced the cancel.
        s.dead().raise();
        let _ = reply.send(WaitOutcome::Abandoned);
        return false;
    }
    match lock {
        Ok(_) if reply.is_closed() => {
            // Granted, but nobody wants it: give it back on this session.
            let ok = s.unlock_all().await;
            let _ = reply.send(WaitOutcome::Abandoned);
            ok && !config_failed
        }
        Ok(_) if s.dead().is_raised() => {
            // Granted on a session already known to be over: never reported.
            let _ = reply.send(WaitOutcome::Failed(session_ended()));
            false
        }
        Ok(_) if s.lease.is_some() && !s.ping().await => {
            // Lease mode: the wait may have begun long ago; a grant counts
            // only with a confirmation sent after it.
            s.dead().raise();
            let _ = reply.send(WaitOutcome::Failed(session_ended()));
            false
        }
        Ok((fence, waited)) => {
            let g = match shared {
                true => s.grant_reader(lock_id, key, waited),
                false => s.grant(lock_id, key, None, fence, GrantTime::now()),
            };
            if let Err(WaitOutcome::Granted(g)) = reply.send(WaitOutcome::Granted(g)) {
                drop(g); // the line left after all: the unlock is queued to us
            }
            !config_failed
        }
        Err(e) if ends_session(&e) => {
            s.dead().raise();
            let _ = reply.send(WaitOutcome::Failed(s.ended_by(e)));
            false
        }
        Err(e) => {
            // Not granted as far as the reply goes; make sure of it.
            let settled = s.unlock_all().await;
            let outcome = match e.code() {
                _ if abandoned => WaitOutcome::Abandoned,
                Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => WaitOutcome::TimedOut,
                Some(c) if *c == SqlState::QUERY_CANCELED => {
                    let reason = e
                        .as_db_error()
                        .map(|d| d.message().to_owned())
                        .unwrap_or_else(|| "canceling statement".into());
                    WaitOutcome::Cancelled(reason)
                }
                _ => WaitOutcome::Failed(fence_query_error(e)),
            };
            let _ = reply.send(outcome);
            // After a cancel request of ours, never reuse the session, even
            // when the wait did end by a cancel: one was seen ending the
            // manager's next wait on the reused session (about 1 in 300
            // dropped waits under load), so the 57014 seen here cannot be
            // told apart from one still on its way.
            settled && !config_failed && !abandoned
        }
    }
}
