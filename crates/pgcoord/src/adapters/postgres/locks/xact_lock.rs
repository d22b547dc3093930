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
//! savepoint (a savepoint per turn of at most PostgreSQL's largest
//! `lock_timeout`, for longer timeouts); the caller's own `lock_timeout`
//! is put back afterwards. The statements are in `xact_savepoint`.
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

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::Transaction;
use tracing::Instrument;

use super::lock_span::lock_span;
pub use super::xact_savepoint::XACT_ANSWER_GRACE;
use super::xact_savepoint::{attempt, wait};
use crate::ports::error::{AcquireFailure, BackendErrorKind, Error, LockAcquisitionError, Result};
use crate::ports::lock_id::checked_lock_id;

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
/// Any timeout is taken: the wait is bounded by a `lock_timeout`, whose
/// largest value is `INT_MAX` milliseconds (about 24.8 days), so a longer
/// timeout is waited for in turns of at most that, each a request of its
/// own (between two turns the request queues again, behind those made
/// meanwhile), and still ends with [`AcquireFailure::Timeout`] only once
/// the whole timeout has passed. A timeout too long for the clock to hold
/// its deadline (`Some(Duration::MAX)`) waits as long as it takes, as
/// `None` does.
///
/// Errors (each a [`LockAcquisitionError`] carrying the key and timeout):
/// - [`AcquireFailure::Timeout`] ([`Error::is_timeout`]): the request was
///   queued by the server and not granted in time. `tx` is still usable:
///   the wait ran in a savepoint that was rolled back.
/// - [`AcquireFailure::Cancelled`]: the server cancelled the wait (your
///   `statement_timeout`, `pg_cancel_backend`); `tx` is usable.
/// - [`AcquireFailure::Backend`] with [`BackendErrorKind::NoAnswer`]: the
///   server did not answer within `timeout` (past 24.8 days: within a
///   turn) + [`XACT_ANSWER_GRACE`] (a statement of yours queued ahead on
///   the same connection counts against it). Nobody said the key is held.
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
        &*crate::ports::key_limit::shown_key(key),
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
        &*crate::ports::key_limit::shown_key(key),
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
