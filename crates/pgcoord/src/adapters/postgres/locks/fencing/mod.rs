//! Fencing tokens: the table that counts each key's acquisitions, its
//! install step, and the check a protected write runs inside its own
//! transaction.
//!
//! A lock alone cannot stop a holder that lost its lock without knowing it
//! yet (its session was ended a moment ago, it was frozen past its lease)
//! from writing after the next holder has started. A fence can, when the
//! protected data lives in the same database: every fenced acquisition
//! increments the key's counter while it holds the advisory lock, and a
//! write is accepted only when it presents the current value.
//!
//! ```no_run
//! # async fn run(client: &mut tokio_postgres::Client) -> pgcoord::Result<()> {
//! use pgcoord::DistributedLock;
//! use pgcoord::{postgres::fencing, PostgresLockManager};
//!
//! let locks = PostgresLockManager::builder("postgres://app@db/app".parse()?)
//!     .fencing(true)
//!     .build()?;
//! locks.install_fencing().await?; // once per database; idempotent
//! let guard = locks.acquire("tenant-7:cutover", None).await?;
//!
//! let tx = client.transaction().await?;
//! fencing::check(&tx, guard.info()).await?; // refused if a later holder exists
//! tx.execute("UPDATE tenants SET store = 'new' WHERE id = 7", &[]).await.ok();
//! tx.commit().await.ok();
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! The guarantee: a transaction that passed [`check`] holds a `FOR SHARE`
//! lock on the key's fence row until it ends, and the next holder's
//! increment must wait for it; so every write committed under token `t`
//! commits before any acquisition with a token greater than `t` is
//! granted, and a write presenting `t` after that is refused with
//! [`Error::Fenced`]. Writes outside this database get the token (the CLI
//! exports `EVENTSOURCE_LOCK_FENCE`) and must compare it themselves.

mod install;

pub use install::{install, Installed};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::Transaction;

use crate::adapters::postgres::connection::connect::pg_error;
use crate::ports::error::{BackendError, BackendErrorKind, Error, FencedError, Result};
use crate::ports::lock_id::lock_id_for_key;
use crate::ports::locks::LockInfo;

/// The fencing table's name, resolved through the session's `search_path`.
pub const FENCE_TABLE: &str = "eventsource_lock_fences";

/// The SQLSTATE the SQL check functions raise for a stale token.
pub const FENCED_SQLSTATE: &str = "ESF01";

/// The key's current token (`FOR SHARE`), and the server's epoch: a token
/// of an earlier epoch is refused even when it is still the row's value (a
/// promotion lost the later increments).
const CHECK: &str = "SELECT f.fence, eventsource_lock_epoch() FROM eventsource_lock_fences f \
     WHERE f.lock_id = $1 FOR SHARE";

/// How many low bits of a token count grants within one epoch; the bits
/// above them are the epoch (see [`epoch_of`]).
pub const EPOCH_SHIFT: u32 = 40;

/// The epoch a fencing token was handed out in: the WAL timeline of the
/// primary that granted it. A promotion (or a point-in-time restore) starts
/// a new, higher timeline, and every token of the new timeline is greater
/// than every token of the earlier ones.
pub fn epoch_of(token: u64) -> u64 {
    token >> EPOCH_SHIFT
}

const CHECK_FUNCTION: &str = "SELECT eventsource_lock_fence_check($1, $2)";

/// Checks, inside the writer's own transaction, that `info` (from a fenced
/// acquisition) still carries its key's current fencing token, and keeps
/// it so until the transaction ends: the row is locked `FOR SHARE`, so the
/// next holder's acquisition waits for this transaction to commit or roll
/// back. Returns the token.
///
/// Fails with [`Error::Fenced`] when a later holder has taken the key (roll
/// back: nothing written in this transaction may be kept), and with
/// [`Error::InvalidArgument`] when `info` carries no token (the manager was
/// not built with [`fencing(true)`](crate::adapters::postgres::PostgresLockManagerBuilder::fencing)).
///
/// # Cancel safety
///
/// Cancel safe: it only reads and row-locks within the caller's
/// transaction; dropped, it leaves that transaction as it was plus at most
/// the row lock, which the transaction's end releases.
pub async fn check(tx: &Transaction<'_>, info: &LockInfo) -> Result<u64> {
    let Some(token) = info.fence else {
        return Err(no_token(info));
    };
    check_token(tx, &info.key, token).await
}

fn no_token(info: &LockInfo) -> Error {
    Error::InvalidArgument(format!(
        "lock {:?} carries no fencing token: build the manager with fencing(true)",
        info.key
    ))
}

/// [`check`] for a token that arrived some other way (for example
/// `EVENTSOURCE_LOCK_FENCE` from `eventsource lock run --fence`).
///
/// # Cancel safety
///
/// Cancel safe, as [`check`].
pub async fn check_token(tx: &Transaction<'_>, key: &str, token: u64) -> Result<u64> {
    let lock_id = lock_id_for_key(key);
    // Typed, unnamed: parse, bind and execute in one round trip.
    let row = tx
        .query_typed_opt(CHECK, &[(&lock_id, Type::INT8)])
        .await
        .map_err(|e| Error::Backend(fence_query_error(e)))?;
    let (current, epoch) = match &row {
        Some(r) => (
            Some(r.get::<_, i64>(0) as u64),
            Some(r.get::<_, i64>(1) as u64),
        ),
        None => (None, None),
    };
    if current == Some(token) && epoch == Some(epoch_of(token)) {
        return Ok(token);
    }
    // Handed out before a failover: no token of this epoch is known yet.
    let current = current.filter(|c| epoch == Some(epoch_of(*c)));
    Err(Error::Fenced(FencedError {
        key: key.to_owned(),
        token,
        current,
    }))
}

/// [`check`] and the transaction's first protected write in **one round
/// trip**: the check is sent first and `write` right behind it (pipelined
/// on the transaction's connection), so the server runs them in that
/// order. The check is the install step's SQL function, which raises for a
/// stale token (SQLSTATE `ESF01`); that aborts the transaction on the
/// server, so `write` cannot take effect either. Returns `write`'s output.
///
/// `write` must be a statement future of the same transaction, e.g.
/// `tx.execute(&prepared_update, &[..])` (a prepared statement, or
/// `execute_typed`/`query_typed`, keeps it to one round trip).
///
/// ```no_run
/// # async fn run(tx: &tokio_postgres::Transaction<'_>, guard: &pgcoord::LockGuard) -> pgcoord::Result<()> {
/// use pgcoord::postgres::fencing;
/// let update = "UPDATE tenants SET store = 'new' WHERE id = 7";
/// let rows = fencing::check_with(tx, guard.info(), tx.execute_typed(update, &[])).await?;
/// # let _ = rows; Ok(()) }
/// ```
///
/// # Cancel safety
///
/// Cancel safe as [`check`]: dropped, it leaves at most the row lock and
/// whatever `write` did inside the caller's transaction, which is not
/// committed (roll it back).
pub async fn check_with<F, T>(tx: &Transaction<'_>, info: &LockInfo, write: F) -> Result<T>
where
    F: std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
{
    let Some(token) = info.fence else {
        return Err(no_token(info));
    };
    let lock_id = info.lock_id;
    let fence = token as i64;
    let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 2] =
        [(&lock_id, Type::INT8), (&fence, Type::INT8)];
    let checked = tx.query_typed_one(CHECK_FUNCTION, &params);
    // Polled in order: the check's messages go out before the write's.
    let (checked, written) = tokio::join!(checked, write);
    match checked {
        Ok(_) => written.map_err(|e| Error::Backend(pg_error(e, BackendErrorKind::Query))),
        Err(e) if e.code().map(|c| c.code()) == Some(FENCED_SQLSTATE) => {
            let current = e
                .as_db_error()
                .and_then(|d| d.detail())
                .and_then(|d| d.strip_prefix("current="))
                .and_then(|c| c.parse::<u64>().ok());
            Err(Error::Fenced(FencedError {
                key: info.key.to_string(),
                token,
                current,
            }))
        }
        Err(e) => Err(Error::Backend(fence_query_error(e))),
    }
}

/// Maps the error of a statement on the fencing table: a missing table
/// (42P01) or function (42883) is [`BackendErrorKind::FencingNotInstalled`].
pub(crate) fn fence_query_error(e: tokio_postgres::Error) -> BackendError {
    let missing = matches!(
        e.code(),
        Some(c) if *c == SqlState::UNDEFINED_TABLE || *c == SqlState::UNDEFINED_FUNCTION
    );
    if missing {
        return BackendError::new(
            BackendErrorKind::FencingNotInstalled,
            "the fencing table eventsource_lock_fences or its functions are missing or \
             from an older version: run PostgresLockManager::install_fencing() or \
             `eventsource lock install` (once per database, and again after an upgrade)",
        )
        .with_source(e);
    }
    pg_error(e, BackendErrorKind::Query)
}
