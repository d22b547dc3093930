//! Transaction-scoped advisory locks: [`acquire_xact`] and
//! [`try_acquire_xact`] take a lock inside the caller's own
//! [`tokio_postgres::Transaction`], released by its commit or rollback.
//!
//! This is what a migration step or a projection that writes read models in
//! one transaction wants: the lock lives exactly as long as the work it
//! protects, and nothing has to be given back. The lock id is
//! [`lock_id_for_key`](crate::lock_id_for_key), so a transaction-scoped lock
//! and a [`PostgresLockManager`](crate::adapters::postgres::PostgresLockManager)'s session-level
//! lock on the same key exclude each other (PostgreSQL's advisory locks of
//! both scopes conflict on one id), in this process and any other.
//!
//! # No port, no in-memory twin
//!
//! There is no port trait for this and the in-memory adapter has no
//! counterpart: the lock's lifetime *is* a PostgreSQL transaction, which has
//! no in-process analogue that would behave the same. Code that takes this
//! lock already holds a `tokio_postgres::Transaction`, so it is tested
//! against a real PostgreSQL (the testkit's throwaway cluster).
//!
//! # How it runs
//!
//! Each call opens a savepoint, takes the lock inside it and releases the
//! savepoint, which hands the lock to the enclosing transaction. When the
//! lock is not granted (the timeout passed, the server cancelled the wait,
//! the future was dropped) the savepoint is rolled back instead, so the
//! caller's transaction survives and stays usable, with everything it did
//! before the call. The wait is bounded by a `lock_timeout` set inside the
//! savepoint; the caller's own `lock_timeout` is put back afterwards.
//!
//! Dropped futures and early errors clean up by queueing `ROLLBACK TO
//! SAVEPOINT` on the transaction's connection at once (without waiting for
//! it): statements on one connection run in order, so the rollback runs
//! before anything the caller sends next.
//!
//! # One thing at a time on the transaction
//!
//! While a call runs, send nothing else on the transaction's connection
//! (nothing polled concurrently, no second lock call joined with it): a
//! statement pipelined behind the lock's would run inside its savepoint,
//! and be rolled back with it when the lock is not granted.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::error::SqlState;
use tokio_postgres::{SimpleQueryMessage, Transaction};
use tracing::Instrument;

use super::lock_span::lock_span;
use crate::adapters::postgres::connection::connect::pg_error;
use crate::ports::error::{
    AcquireFailure, BackendError, BackendErrorKind, Error, LockAcquisitionError, Result,
};
use crate::ports::lock_id::checked_lock_id;

/// How long past its deadline (and, for [`try_acquire_xact`], at all) a
/// call waits for the server to answer before it reports
/// [`BackendErrorKind::NoAnswer`]: the server answers a wait that reached its
/// `lock_timeout` within a round trip, so silence beyond this is a server or
/// network that does not answer, not a lock held elsewhere.
pub const XACT_ANSWER_GRACE: Duration = Duration::from_secs(2);

const SAVEPOINT: &str = "eventsource_xact_lock";

/// A lock held by a transaction until it commits or rolls back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XactLock {
    /// The key asked for.
    pub key: String,
    /// Its advisory-lock id ([`lock_id_for_key`](crate::lock_id_for_key)).
    pub lock_id: i64,
    /// When the server granted it, in UTC (the client's clock).
    pub acquired_at: DateTime<Utc>,
}

/// Takes `key` for the rest of `tx`, waiting up to `timeout` (`None`: as
/// long as it takes; `Some(Duration::ZERO)`: one attempt), with
/// `pg_catalog.pg_advisory_xact_lock`. Released when `tx` commits or rolls
/// back (there is no explicit release; PostgreSQL has none for this scope).
///
/// Errors (each a [`LockAcquisitionError`] carrying the key and timeout):
/// - [`AcquireFailure::Timeout`] ([`Error::is_timeout`]): the request was
///   queued by the server and not granted in time. `tx` is still usable:
///   the wait ran in a savepoint that was rolled back.
/// - [`AcquireFailure::Cancelled`]: the server cancelled the wait (your
///   `statement_timeout`, `pg_cancel_backend`); `tx` is usable.
/// - [`AcquireFailure::Backend`] with [`BackendErrorKind::NoAnswer`]: the
///   server did not answer within `timeout` + [`XACT_ANSWER_GRACE`] (a
///   statement of yours queued ahead on the same connection counts
///   against it). Nobody said the key is held.
/// - [`AcquireFailure::Backend`] with SQLSTATE `40P01`: PostgreSQL found a
///   deadlock (two transactions each waiting for a lock the other holds)
///   and chose this wait; `tx` is usable. Take several keys in one order
///   (for example by lock id) to avoid it.
/// - Other backend errors: `tx` was already aborted, or the connection ended.
///
/// ```no_run
/// # async fn run(client: &mut tokio_postgres::Client) -> pgcoord::Result<()> {
/// use std::time::Duration;
/// use pgcoord::postgres::acquire_xact;
///
/// let tx = client.transaction().await.expect("BEGIN");
/// acquire_xact(&tx, "migrate:tenant-42", Some(Duration::from_secs(5))).await?;
/// tx.batch_execute("UPDATE accounts SET plan = 'pro' WHERE tenant = 42").await.expect("UPDATE");
/// tx.commit().await.expect("COMMIT"); // releases the lock
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Not cancel safe in tokio's sense: a dropped wait loses its place in the
/// server's queue. It leaks nothing: dropped at any point after it sent its
/// statement, the call queues a rollback to its savepoint on the connection,
/// so `tx` never holds the lock because of a dropped call and stays usable.
/// The server-side wait is not cancelled (a cancel request could reach
/// whatever your connection runs next instead): it ends at the deadline, or
/// when the lock is granted (then the rollback gives it back at once), and
/// statements you send on the connection meanwhile wait behind it. Prefer a
/// timeout when the call may be dropped.
pub async fn acquire_xact(
    tx: &Transaction<'_>,
    key: &str,
    timeout: Option<Duration>,
) -> Result<XactLock> {
    let span = lock_span!(
        "eventsource.lock.acquire_xact",
        "acquire_xact",
        key,
        "eventsource.lock.id" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        "otel.status_code" = tracing::field::Empty,
    );
    async move {
        let lock_id = checked_lock_id(key, timeout)?;
        tracing::Span::current().record("eventsource.lock.id", lock_id);
        let result = if timeout == Some(Duration::ZERO) {
            match attempt(tx, lock_id).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(AcquireFailure::Timeout),
                Err(e) => Err(e),
            }
        } else {
            wait(tx, lock_id, timeout).await
        };
        let outcome = match &result {
            Ok(()) => "acquired",
            Err(AcquireFailure::Timeout) => "timeout",
            Err(_) => "error",
        };
        record_outcome(outcome, &result);
        result
            .map(|()| granted(key, lock_id))
            .map_err(|f| Error::LockAcquisition(LockAcquisitionError::new(key, f, timeout)))
    }
    .instrument(span)
    .await
}

/// Takes `key` for the rest of `tx` if it is free, with
/// `pg_catalog.pg_try_advisory_xact_lock`; `Ok(None)` when another session
/// or transaction holds it (`tx` stays usable either way). Released when
/// `tx` commits or rolls back. A server that does not answer within
/// [`XACT_ANSWER_GRACE`] is an [`AcquireFailure::Backend`] error of kind
/// [`BackendErrorKind::NoAnswer`].
///
/// ```no_run
/// # async fn run(client: &mut tokio_postgres::Client) -> pgcoord::Result<()> {
/// use pgcoord::postgres::try_acquire_xact;
///
/// let tx = client.transaction().await.expect("BEGIN");
/// if try_acquire_xact(&tx, "rebuild:orders").await?.is_none() {
///     return Ok(()); // someone else is rebuilding
/// }
/// // ... the rebuild, in `tx` ...
/// tx.commit().await.expect("COMMIT");
/// # Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Cancel safe: dropped after it sent its statement, the call queues a
/// rollback to its savepoint, so a lock it took is given back before
/// anything you send next, and calling again finds the key as it was.
pub async fn try_acquire_xact(tx: &Transaction<'_>, key: &str) -> Result<Option<XactLock>> {
    let span = lock_span!(
        "eventsource.lock.try_acquire_xact",
        "try_acquire_xact",
        key,
        "eventsource.lock.id" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        "otel.status_code" = tracing::field::Empty,
    );
    async move {
        let zero = Some(Duration::ZERO);
        let lock_id = checked_lock_id(key, zero)?;
        tracing::Span::current().record("eventsource.lock.id", lock_id);
        let result = attempt(tx, lock_id).await;
        let outcome = match &result {
            Ok(true) => "acquired",
            Ok(false) => "held_elsewhere",
            Err(_) => "error",
        };
        record_outcome(outcome, &result);
        match result {
            Ok(true) => Ok(Some(granted(key, lock_id))),
            Ok(false) => Ok(None),
            Err(f) => Err(LockAcquisitionError::new(key, f, zero).into()),
        }
    }
    .instrument(span)
    .await
}

/// Records the outcome on the current span, and the failure's type.
fn record_outcome<T>(outcome: &str, result: &Result<T, AcquireFailure>) {
    let span = tracing::Span::current();
    span.record("eventsource.lock.outcome", outcome);
    if let Err(f) = result {
        let kind = match f {
            AcquireFailure::Timeout => "timeout",
            AcquireFailure::Cancelled { .. } => "cancelled",
            AcquireFailure::KeyTooLong { .. } => "key_too_long",
            AcquireFailure::Backend(b) if b.kind() == BackendErrorKind::NoAnswer => "no_answer",
            _ => "backend",
        };
        span.record("error.type", kind);
        span.record("otel.status_code", "ERROR");
    }
}

fn granted(key: &str, lock_id: i64) -> XactLock {
    XactLock {
        key: key.to_owned(),
        lock_id,
        acquired_at: Utc::now(),
    }
}

/// One try-lock in a savepoint.
async fn attempt(tx: &Transaction<'_>, lock_id: i64) -> Result<bool, AcquireFailure> {
    let sql =
        format!("SAVEPOINT {SAVEPOINT}; SELECT pg_catalog.pg_try_advisory_xact_lock({lock_id})");
    let rows = run_in_savepoint(tx, &sql, Some(XACT_ANSWER_GRACE)).await?;
    let got = first_values(&rows).last().is_some_and(|v| v == "t");
    // Granted or not, the savepoint's work is kept: the lock passes to `tx`.
    send_now(tx, &format!("RELEASE SAVEPOINT {SAVEPOINT}"));
    Ok(got)
}

/// A bounded (or unbounded) wait in a savepoint, the caller's
/// `lock_timeout` put back afterwards.
async fn wait(
    tx: &Transaction<'_>,
    lock_id: i64,
    timeout: Option<Duration>,
) -> Result<(), AcquireFailure> {
    // lock_timeout counts whole milliseconds and 0 means "none": round up.
    let lock_timeout = match timeout {
        Some(t) => format!("{}ms", t.as_micros().div_ceil(1000).max(1)),
        None => "0".to_owned(),
    };
    let sql = format!(
        "SAVEPOINT {SAVEPOINT}; SELECT pg_catalog.current_setting('lock_timeout'); \
         SET LOCAL lock_timeout = '{lock_timeout}'; \
         SELECT pg_catalog.pg_advisory_xact_lock({lock_id})"
    );
    let bound = timeout.map(|t| t + XACT_ANSWER_GRACE);
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
        Some(bound) => match tokio::time::timeout(bound, sent).await {
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
}
