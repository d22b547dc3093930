//! The SQL a session runs, prepared once when it opens.
//!
//! Every function is called schema-qualified (`pg_catalog.`), so a function
//! of the same name earlier in the `search_path` cannot stand in for it.

use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};

use super::super::connect::{pg_error, SESSION_SETUP, SESSION_SETUP_PG14};
use crate::ports::error::{BackendError, BackendErrorKind};

const TRY_ONE: &str = "SELECT pg_catalog.pg_try_advisory_lock($1)";
const UNLOCK_ONE: &str = "SELECT pg_catalog.pg_advisory_unlock($1)";
/// Locks and unlocks of one batch, in order; `true` in `$2` means lock.
const BATCH: &str = "SELECT CASE WHEN t.op THEN pg_catalog.pg_try_advisory_lock(t.id) \
     ELSE pg_catalog.pg_advisory_unlock(t.id) END \
     FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::bool[])) \
     WITH ORDINALITY AS t(id, op, n) ORDER BY t.n";
const LOCK: &str = "SELECT pg_catalog.pg_advisory_lock($1)";
const SET_LOCK_TIMEOUT: &str = "SELECT pg_catalog.set_config('lock_timeout', $1, false)";
/// After a wait that did not end in a grant: the dedicated session holds
/// nothing else, so this establishes that it holds nothing at all (a grant
/// that raced a timeout or a cancel is given back).
const UNLOCK_ALL: &str = "SELECT pg_catalog.pg_advisory_unlock_all()";
const PING: &str = "SELECT 1";
const HELD_IDS: &str = "SELECT (classid::int8 << 32) | objid::int8 FROM pg_catalog.pg_locks \
     WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND pid = pg_catalog.pg_backend_pid()";
const IDENTIFY: &str = "SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery()";

/// The prepared statements of one session.
pub(super) struct Statements {
    pub(super) try_one: Statement,
    pub(super) unlock_one: Statement,
    pub(super) batch: Statement,
    pub(super) lock: Statement,
    pub(super) set_lock_timeout: Statement,
    pub(super) unlock_all: Statement,
    pub(super) ping: Statement,
    pub(super) held_ids: Statement,
}

/// What a session learns about its server when it opens.
pub(super) struct Identity {
    pub(super) pid: i32,
    pub(super) in_recovery: bool,
}

/// Applies the session settings and prepares every statement, all in one
/// pipelined round trip.
pub(super) async fn prepare(client: &Client) -> Result<(Statements, Identity), BackendError> {
    let prep = |sql: &'static str, types: &'static [Type]| client.prepare_typed(sql, types);
    let (setup, pg14, prepared) = tokio::join!(
        client.batch_execute(SESSION_SETUP),
        client.batch_execute(SESSION_SETUP_PG14),
        async {
            tokio::try_join!(
                prep(TRY_ONE, &[Type::INT8]),
                prep(UNLOCK_ONE, &[Type::INT8]),
                prep(BATCH, &[Type::INT8_ARRAY, Type::BOOL_ARRAY]),
                prep(LOCK, &[Type::INT8]),
                prep(SET_LOCK_TIMEOUT, &[Type::TEXT]),
                prep(UNLOCK_ALL, &[]),
                prep(PING, &[]),
                prep(HELD_IDS, &[]),
                client.query_one(IDENTIFY, &[]),
            )
        }
    );
    setup.map_err(|e| pg_error(e, BackendErrorKind::NotPostgres))?;
    // Servers before 14 do not know the setting; that is fine.
    drop(pg14);
    let (try_one, unlock_one, batch, lock, set_lock_timeout, unlock_all, ping, held_ids, row) =
        prepared.map_err(|e| pg_error(e, BackendErrorKind::NotPostgres))?;
    let statements = Statements {
        try_one,
        unlock_one,
        batch,
        lock,
        set_lock_timeout,
        unlock_all,
        ping,
        held_ids,
    };
    let identity = Identity {
        pid: row.get(0),
        in_recovery: row.get(1),
    };
    Ok((statements, identity))
}
