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

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Transaction};

use crate::adapters::postgres::connection::connect::pg_error;
use crate::ports::error::{BackendError, BackendErrorKind, Error, FencedError, Result};
use crate::ports::lock_id::lock_id_for_key;
use crate::ports::locks::LockInfo;

/// The fencing table's name, resolved through the session's `search_path`.
pub const FENCE_TABLE: &str = "eventsource_lock_fences";

/// The SQLSTATE the SQL check functions raise for a stale token.
pub const FENCED_SQLSTATE: &str = "ESF01";

/// Serializes concurrent installs (an arbitrary constant advisory id).
const INSTALL_LOCK: i64 = 0x6576_656e_7466_656e; // "eventfen"

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

const CURRENT_SCHEMA: &str = "SELECT pg_catalog.quote_ident(pg_catalog.current_schema())";
/// Fence tables of this database outside the current schema.
const OTHER_FENCE_TABLES: &str = "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_class c \
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'eventsource_lock_fences' \
    AND c.relkind IN ('r', 'p') AND n.nspname IS DISTINCT FROM pg_catalog.current_schema() ORDER BY 1";

/// The install script for schema `s` (already quoted).
fn install_sql(s: &str) -> String {
    format!(
        r#"
CREATE TABLE IF NOT EXISTS {s}.eventsource_lock_fences (
    lock_id bigint PRIMARY KEY,
    key text NOT NULL,
    fence bigint NOT NULL CHECK (fence >= 0),
    last_run_started timestamptz
);
COMMENT ON TABLE {s}.eventsource_lock_fences IS
    'eventsource: the last fencing token handed out per advisory lock id';
DO $migrate$
DECLARE
    rel oid := (SELECT c.oid FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = pg_catalog.current_schema() AND c.relname = 'eventsource_lock_fences');
BEGIN
    -- Tables created by versions without the run log: add it, and allow
    -- fence 0 (a row made by a run-start record, no token handed out yet).
    -- Checked first, so that a current table takes no ALTER TABLE lock.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = rel
            AND a.attname = 'last_run_started' AND NOT a.attisdropped) THEN
        ALTER TABLE {s}.eventsource_lock_fences ADD COLUMN last_run_started timestamptz;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conrelid = rel
            AND k.conname = 'eventsource_lock_fences_fence_check'
            AND pg_catalog.pg_get_constraintdef(k.oid) = 'CHECK ((fence > 0))') THEN
        ALTER TABLE {s}.eventsource_lock_fences
            DROP CONSTRAINT eventsource_lock_fences_fence_check,
            ADD CONSTRAINT eventsource_lock_fences_fence_check CHECK (fence >= 0);
    END IF;
END
$migrate$;
COMMENT ON COLUMN {s}.eventsource_lock_fences.last_run_started IS
    'eventsource: when the last run of this key started (lock run --min-interval), by the server clock';
-- The epoch of a token: this primary's WAL timeline, which every promotion
-- and point-in-time restore raises. SECURITY DEFINER: the roles that lock
-- need no right to the WAL functions, only the role that installs.
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_epoch() RETURNS bigint
    LANGUAGE sql STABLE STRICT SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT ('x' || pg_catalog.substr(
        pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_id(p_key text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('x' || pg_catalog.substr(pg_catalog.encode(
        pg_catalog.sha256(pg_catalog.convert_to(p_key, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint
        & 9223372036854775807
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_fence_check(p_lock_id bigint, p_token bigint)
    RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    current_fence bigint;
BEGIN
    SELECT f.fence INTO current_fence FROM {s}.eventsource_lock_fences f
        WHERE f.lock_id = p_lock_id FOR SHARE;
    IF current_fence IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'fencing token % of lock id % is not the current token %',
            p_token, p_lock_id, coalesce(current_fence::text, '(none)')
            USING ERRCODE = '{FENCED_SQLSTATE}',
                  DETAIL = 'current=' || coalesce(current_fence::text, '');
    END IF;
    IF (p_token >> {EPOCH_SHIFT}) <> {s}.eventsource_lock_epoch() THEN
        RAISE EXCEPTION 'fencing token % of lock id % was handed out before a failover',
            p_token, p_lock_id
            USING ERRCODE = '{FENCED_SQLSTATE}',
                  DETAIL = 'current=',
                  HINT = 'the server''s timeline changed since: a later holder may exist';
    END IF;
    RETURN current_fence;
END
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_claim_run(
    p_lock_ids bigint[], p_keys text[], p_interval_us bigint,
    OUT started boolean, OUT at timestamptz, OUT last_started timestamptz)
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.eventsource_lock_fences AS f (lock_id, key, fence)
        SELECT i.id, i.k, 0 FROM unnest(p_lock_ids, p_keys) AS i(id, k)
        ORDER BY i.id
        ON CONFLICT (lock_id) DO NOTHING;
    PERFORM 1 FROM {s}.eventsource_lock_fences f
        WHERE f.lock_id = ANY (p_lock_ids) ORDER BY f.lock_id FOR NO KEY UPDATE;
    SELECT pg_catalog.max(f.last_run_started) INTO last_started
        FROM {s}.eventsource_lock_fences f WHERE f.lock_id = ANY (p_lock_ids);
    -- The server's clock now, after the row locks: never now(), the start
    -- of the transaction.
    at := pg_catalog.clock_timestamp();
    IF last_started IS NOT NULL
            AND last_started > at - p_interval_us * interval '1 microsecond' THEN
        started := false;
        RETURN;
    END IF;
    -- The record must survive a server crash even where commits are
    -- asynchronous: this transaction's commit waits for its WAL flush.
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    UPDATE {s}.eventsource_lock_fences f SET last_run_started = at
        WHERE f.lock_id = ANY (p_lock_ids);
    started := true;
END
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_fence_check_key(p_key text, p_token bigint)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT {s}.eventsource_lock_fence_check({s}.eventsource_lock_id(p_key), p_token)
$$;
"#
    )
}

/// Creates the fencing table and the SQL check functions in the
/// connection's current schema, if they are not there yet. Idempotent and
/// safe to run concurrently; needs the right to create in that schema.
///
/// The SQL functions, for writers that are not Rust:
/// `eventsource_lock_id(key text) -> bigint` (the crate's key derivation),
/// `eventsource_lock_fence_check(lock_id bigint, token bigint)` and
/// `eventsource_lock_fence_check_key(key text, token bigint)`, which take
/// the same `FOR SHARE` lock as [`check`] and raise SQLSTATE `ESF01`
/// for a stale token; and `eventsource_lock_claim_run(lock_ids, keys,
/// interval_us)`, the run log of [`PostgresRunLog`](crate::adapters::postgres::PostgresRunLog)
/// (the table's `last_run_started` column). On a table made by an older
/// version it adds that column and lets `fence` be 0 (a row made by a run
/// record, no token handed out yet).
///
/// # Cancel safety
///
/// Cancel safe: it runs in one transaction, which a dropped call leaves
/// uncommitted (the server rolls it back when the connection goes or the
/// next statement runs), so calling again starts from what was there.
pub async fn install(client: &mut Client) -> Result<()> {
    let query = |e| Error::Backend(pg_error(e, BackendErrorKind::Query));
    let tx = client.transaction().await.map_err(query)?;
    tx.execute(
        "SELECT pg_catalog.pg_advisory_xact_lock($1)",
        &[&INSTALL_LOCK],
    )
    .await
    .map_err(query)?;
    let schema: Option<String> = tx
        .query_one(CURRENT_SCHEMA, &[])
        .await
        .map_err(query)?
        .get(0);
    let Some(schema) = schema else {
        return Err(Error::InvalidArgument(
            "no schema of the search_path exists; the fencing table has nowhere to go".into(),
        ));
    };
    // One table per database: fenced managers find theirs through their
    // search_path, and two tables would hand out the same tokens twice.
    let elsewhere: Vec<String> = tx
        .query(OTHER_FENCE_TABLES, &[])
        .await
        .map_err(query)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !elsewhere.is_empty() {
        let message = format!(
            "a fence table exists already in schema {} and this connection's current schema is \
             {schema}: a second table would hand out the same tokens and run-log slots again; \
             put that schema first in the search_path (or drop the other table)",
            elsewhere.join(", ")
        );
        let code = crate::ports::sql_state::SqlState::DUPLICATE_TABLE;
        return Err(Error::Backend(
            BackendError::new(BackendErrorKind::Query, message).with_code(code),
        ));
    }
    tx.batch_execute(&install_sql(&schema))
        .await
        .map_err(query)?;
    tx.commit().await.map_err(query)?;
    Ok(())
}

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
