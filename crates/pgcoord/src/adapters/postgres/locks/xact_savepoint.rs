//! The statements of `acquire_xact` and `try_acquire_xact` (in
//! `xact_lock`, which imports this file, not the other way): a try or a
//! wait in a savepoint of the caller's transaction, which is released to
//! keep the lock or rolled back to give up (see `xact_lock` for why).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::{SimpleQueryMessage, Transaction};

use crate::adapters::postgres::connection::connect::pg_error;
use crate::ports::deadline::deadline_in;
use crate::ports::error::{AcquireFailure, BackendError, BackendErrorKind};

/// How long past its deadline (and, for `try_acquire_xact`, at all) a
/// call waits for the server to answer before it reports
/// [`BackendErrorKind::NoAnswer`]: the server answers a wait that reached its
/// `lock_timeout` within a round trip, so silence beyond this is a server or
/// network that does not answer, not a lock held elsewhere.
pub const XACT_ANSWER_GRACE: Duration = Duration::from_secs(2);

/// PostgreSQL's largest `lock_timeout`: `INT_MAX` milliseconds (about
/// 24.8 days); a larger one is refused ("invalid value for parameter").
pub(super) const MAX_LOCK_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

const SAVEPOINT: &str = "eventsource_xact_lock";

/// One try-lock in a savepoint.
pub(super) async fn attempt(tx: &Transaction<'_>, lock_id: i64) -> Result<bool, AcquireFailure> {
    let sql =
        format!("SAVEPOINT {SAVEPOINT}; SELECT pg_catalog.pg_try_advisory_xact_lock({lock_id})");
    let rows = run_in_savepoint(tx, &sql, Some(XACT_ANSWER_GRACE)).await?;
    let got = first_values(&rows).last().is_some_and(|v| v == "t");
    // Granted or not, the savepoint's work is kept: the lock passes to `tx`.
    send_now(tx, &format!("RELEASE SAVEPOINT {SAVEPOINT}"));
    Ok(got)
}

/// A wait of up to `timeout` (`None`, or a timeout too long for the clock:
/// as long as it takes). A deadline beyond the server's largest
/// `lock_timeout` ([`MAX_LOCK_TIMEOUT`]) is waited for in turns of at most
/// that: a turn the server ends at its cap, with time left, is followed by
/// the next (a new request, queued behind those made meanwhile).
pub(super) async fn wait(
    tx: &Transaction<'_>,
    lock_id: i64,
    timeout: Option<Duration>,
) -> Result<(), AcquireFailure> {
    let deadline = deadline_in(timeout);
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let turn = left.map(|l| l.min(MAX_LOCK_TIMEOUT));
        match wait_turn(tx, lock_id, turn).await {
            // The server's cap ended the turn, not the caller's deadline.
            Err(AcquireFailure::Timeout) if ends_early(turn, left) => {}
            outcome => return outcome,
        }
    }
}

/// Whether a turn of `turn` ends before the deadline, `left` away.
fn ends_early(turn: Option<Duration>, left: Option<Duration>) -> bool {
    matches!((turn, left), (Some(turn), Some(left)) if turn < left)
}

/// `lock_timeout` for a wait of up to `turn` (at most
/// [`MAX_LOCK_TIMEOUT`]; `None`: no limit). It counts whole milliseconds
/// and 0 means "none": rounded up.
fn lock_timeout_setting(turn: Option<Duration>) -> String {
    match turn {
        Some(t) => format!("{}ms", t.as_micros().div_ceil(1000).max(1)),
        None => "0".to_owned(),
    }
}

/// One wait in a savepoint, bounded by `lock_timeout` = `turn`, the
/// caller's `lock_timeout` put back afterwards.
async fn wait_turn(
    tx: &Transaction<'_>,
    lock_id: i64,
    turn: Option<Duration>,
) -> Result<(), AcquireFailure> {
    let lock_timeout = lock_timeout_setting(turn);
    let sql = format!(
        "SAVEPOINT {SAVEPOINT}; SELECT pg_catalog.current_setting('lock_timeout'); \
         SET LOCAL lock_timeout = '{lock_timeout}'; \
         SELECT pg_catalog.pg_advisory_xact_lock({lock_id})"
    );
    // A turn is at most MAX_LOCK_TIMEOUT: this cannot overflow.
    let bound = turn.map(|t| t + XACT_ANSWER_GRACE);
    let rows = run_in_savepoint(tx, &sql, bound).await?;
    let restore = match first_values(&rows).first() {
        Some(prev) if is_plain_setting(prev) => {
            format!("SELECT pg_catalog.set_config('lock_timeout', '{prev}', true)")
        }
        _ => "SET LOCAL lock_timeout TO DEFAULT".to_owned(),
    };
    send_now(tx, &format!("{restore}; RELEASE SAVEPOINT {SAVEPOINT}"));
    Ok(())
}

/// `lock_timeout` as the server shows it (`0`, `250ms`, `1min`): safe to
/// put back inside quotes.
fn is_plain_setting(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.')
}

/// The first column of each row, in order.
fn first_values(messages: &[SimpleQueryMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// Runs `sql` (which opens the savepoint) and, if it fails or the future is
/// dropped after sending it, rolls the savepoint back. On success the
/// savepoint is left open for the caller to release.
async fn run_in_savepoint(
    tx: &Transaction<'_>,
    sql: &str,
    bound: Option<Duration>,
) -> Result<Vec<SimpleQueryMessage>, AcquireFailure> {
    let mut undo = Undo { tx, armed: false };
    let mut query = pin!(tx.simple_query(sql));
    // tokio-postgres sends a simple query on its first poll: from then on a
    // drop must undo the savepoint.
    let sent = std::future::poll_fn(|cx| {
        undo.armed = true;
        query.as_mut().poll(cx)
    });
    let answer = match bound {
        Some(bound) => match super::silence::answer_within(bound, sent).await {
            Ok(answer) => answer,
            Err(_) => {
                return Err(AcquireFailure::Backend(BackendError::new(
                    BackendErrorKind::NoAnswer,
                    format!("the server did not answer within {bound:?}"),
                )))
            }
        },
        None => sent.await,
    };
    match answer {
        Ok(rows) => {
            undo.armed = false;
            Ok(rows)
        }
        Err(e) => Err(failure(e)),
    }
}

fn failure(e: tokio_postgres::Error) -> AcquireFailure {
    match e.code() {
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => AcquireFailure::Timeout,
        Some(c) if *c == SqlState::QUERY_CANCELED => AcquireFailure::Cancelled {
            reason: e
                .as_db_error()
                .map(|d| d.message().to_owned())
                .unwrap_or_else(|| e.to_string()),
        },
        _ => AcquireFailure::Backend(pg_error(e, BackendErrorKind::Query)),
    }
}

/// Rolls the savepoint back when dropped armed.
struct Undo<'a, 't> {
    tx: &'a Transaction<'t>,
    armed: bool,
}

impl Drop for Undo<'_, '_> {
    fn drop(&mut self) {
        if self.armed {
            send_now(
                self.tx,
                &format!("ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}"),
            );
        }
    }
}

/// Queues `sql` on the transaction's connection without waiting for it:
/// tokio-postgres sends a statement batch on the first poll of its future,
/// and discards the answer of one whose future was dropped. Statements on
/// one connection run in order, so it runs before anything sent later.
fn send_now(tx: &Transaction<'_>, sql: &str) {
    let mut batch = pin!(tx.batch_execute(sql));
    let mut cx = Context::from_waker(Waker::noop());
    if let Poll::Ready(Err(e)) = batch.as_mut().poll(&mut cx) {
        tracing::debug!(error = %e, "could not queue a savepoint statement");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_put_back_are_plain() {
        assert!(is_plain_setting("0") && is_plain_setting("250ms") && is_plain_setting("1min"));
        assert!(!is_plain_setting("") && !is_plain_setting("1'; DROP") && !is_plain_setting("a b"));
    }

    /// PostgreSQL refuses a `lock_timeout` over `INT_MAX` ms: 30 days used
    /// to be sent as `2592000000ms`, and the call failed at once.
    #[test]
    fn lock_timeouts_stay_within_what_the_server_takes() {
        assert_eq!(MAX_LOCK_TIMEOUT.as_millis(), 2_147_483_647);
        assert_eq!(lock_timeout_setting(None), "0");
        assert_eq!(lock_timeout_setting(Some(Duration::from_micros(1))), "1ms");
        assert_eq!(
            lock_timeout_setting(Some(Duration::from_micros(1001))),
            "2ms"
        );
        let month = Duration::from_secs(30 * 86_400);
        let turn = Some(month.min(MAX_LOCK_TIMEOUT));
        assert_eq!(lock_timeout_setting(turn), "2147483647ms");
        // That turn ends before the month does: another follows.
        assert!(ends_early(turn, Some(month)));
        assert!(!ends_early(Some(month), Some(month)));
        assert!(!ends_early(None, None));
    }
}
