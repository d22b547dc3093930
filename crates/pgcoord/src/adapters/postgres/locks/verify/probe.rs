//! The SQL side of `verify()`: every statement `pg_catalog.`-qualified, so
//! that a function of the same name earlier in `search_path` cannot stand
//! in for the real one.
//!
//! Besides the original observations (see [`Observations`]), the probe
//! exercises every advisory function a lock manager may call, on the same
//! test key, with session A holding and session B asking:
//!
//! - the blocking `pg_advisory_lock` must wait (B, with a short
//!   `lock_timeout`, gets SQLSTATE 55P03) and, after A's unlock, be
//!   granted (B then shows in `pg_locks`);
//! - the shared mode: A's exclusive lock refuses B's shared try-lock and
//!   shared wait; two shared holders coexist and refuse an exclusive one;
//!   `pg_advisory_unlock_shared` frees them;
//! - `pg_advisory_unlock_all` frees what a session holds.

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use super::{query_failed, Observations, VerifyProblem};
use crate::ports::error::Result;

/// How long the waits that must fail may wait.
const SHORT_WAIT: &str = "100ms";
/// The bound on waits that must succeed at once (the key is free).
const LONG_WAIT: &str = "10s";

const TRY_LOCK: &str = "SELECT pg_catalog.pg_try_advisory_lock($1)";
const TRY_LOCK_SHARED: &str = "SELECT pg_catalog.pg_try_advisory_lock_shared($1)";
const LOCK: &str = "SELECT pg_catalog.pg_advisory_lock($1)::text";
const LOCK_SHARED: &str = "SELECT pg_catalog.pg_advisory_lock_shared($1)::text";
const UNLOCK: &str = "SELECT pg_catalog.pg_advisory_unlock($1)";
const UNLOCK_SHARED: &str = "SELECT pg_catalog.pg_advisory_unlock_shared($1)";
const UNLOCK_ALL: &str = "SELECT pg_catalog.pg_advisory_unlock_all()::text";
const PID: &str = "SELECT pg_catalog.pg_backend_pid()";
const TRY_LOCK_ON: &str = "SELECT pg_catalog.pg_try_advisory_lock($1), pg_catalog.pg_backend_pid()";
const UNLOCK_ON: &str = "SELECT pg_catalog.pg_advisory_unlock($1), pg_catalog.pg_backend_pid()";
const HOLDS: &str =
    "SELECT pg_catalog.pg_backend_pid(), EXISTS (SELECT 1 FROM pg_catalog.pg_locks \
     WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
     AND pid = pg_catalog.pg_backend_pid() AND ((classid::int8 << 32) | objid::int8) = $1)";

/// After a check that failed part-way: gives the test key back wherever
/// it is still held. Behind a pooler in transaction mode the probe's
/// statements ran on server sessions that the pooler keeps for its next
/// clients, so the key would stay held (and listed by `lock holders`)
/// until the pooler closes them. Each unlock lands on whichever server
/// session the pooler picks, so it is repeated, a bounded number of times,
/// while `pg_locks` (which any session sees whole) still shows the key,
/// and a session still left holding it is ended (below).
/// The key is this check's own (a random one), so unlocking it anywhere
/// harms nobody. Sent with the simple protocol, one message each (a
/// prepared statement could be parsed on one server session and run on
/// another). Best effort.
pub(super) async fn release_everywhere(a: &Client, b: &Client, id: i64) {
    let still_held = format!(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' \
         AND objsubid = 1 AND granted AND ((classid::int8 << 32) | objid::int8) = {id})"
    );
    // Every hold of the key by the session that runs it, exclusive and
    // shared (the checks take it at most a few times in one session).
    let unlock = format!(
        "SELECT count(*) FROM pg_catalog.generate_series(1, 4) \
         WHERE pg_catalog.pg_advisory_unlock({id}) OR pg_catalog.pg_advisory_unlock_shared({id})"
    );
    for _ in 0..5 {
        let held = a.simple_query(&still_held).await.ok().and_then(|messages| {
            messages.into_iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|v| v == "t"),
                _ => None,
            })
        });
        if held != Some(true) {
            return;
        }
        for c in [a, b] {
            let _ = c.simple_query(&unlock).await;
        }
    }
    // A pooler hands each statement the server session it used last, so
    // the one left holding the key may never come round again: end it,
    // only if it is idle and holds no other advisory lock (nothing of
    // anyone else's is lost; the pooler opens another). The same role may
    // end its own sessions; where it may not, the key stays until the
    // pooler closes that session.
    let _ = a
        .simple_query(&format!(
            "SELECT count(pg_catalog.pg_terminate_backend(l.pid)) FROM pg_catalog.pg_locks l \
             JOIN pg_catalog.pg_stat_activity s ON s.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.objsubid = 1 \
             AND ((l.classid::int8 << 32) | l.objid::int8) = {id} \
             AND s.state = 'idle' AND l.pid <> pg_catalog.pg_backend_pid() \
             AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks o WHERE o.pid = l.pid \
               AND o.locktype = 'advisory' AND ((o.classid::int8 << 32) | o.objid::int8) <> {id})"
        ))
        .await;
}

async fn flag(c: &Client, sql: &str, id: i64) -> Result<bool> {
    Ok(c.query_one(sql, &[&id]).await.map_err(query_failed)?.get(0))
}

/// A flag statement that also names its backend ([`TRY_LOCK_ON`],
/// [`UNLOCK_ON`]): the flag, and the pid of the backend that ran it.
async fn flag_on(c: &Client, sql: &str, id: i64) -> Result<(bool, i32)> {
    let row = c.query_one(sql, &[&id]).await.map_err(query_failed)?;
    Ok((row.get(0), row.get(1)))
}

/// Whether this session holds `id` in `pg_locks` (any mode).
async fn holds(c: &Client, id: i64) -> Result<bool> {
    Ok(c.query_one(HOLDS, &[&id])
        .await
        .map_err(query_failed)?
        .get(1))
}

/// Runs a blocking lock statement with `lock_timeout` in a transaction of
/// its own: `Ok(true)` granted, `Ok(false)` refused after the timeout
/// (55P03). The session-level lock, if granted, outlives the transaction.
async fn wait_for(c: &Client, sql: &str, id: i64, wait: &str) -> Result<bool> {
    // statement_timeout 0: a role's own short timeout must not cancel the
    // wait that is meant to end by lock_timeout (57014 instead of 55P03).
    c.batch_execute(&format!(
        "BEGIN; SET LOCAL lock_timeout = '{wait}'; SET LOCAL statement_timeout = 0"
    ))
    .await
    .map_err(query_failed)?;
    let outcome = c.query_one(sql, &[&id]).await;
    let end = if outcome.is_ok() {
        "COMMIT"
    } else {
        "ROLLBACK"
    };
    c.batch_execute(end).await.map_err(query_failed)?;
    match outcome {
        Ok(_) => Ok(true),
        Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => Ok(false),
        Err(e) => Err(query_failed(e)),
    }
}

/// Turns the role's `statement_timeout` off for the checks' own session:
/// the checks wait on purpose (a 100 ms lock wait that must be refused),
/// and a short timeout of the role's would cancel them (SQLSTATE 57014).
/// How long a test connection's first statement may go unanswered. A
/// server answers a `SET` at once; a pooler with no server connection free
/// for this database and user (PgBouncer's `default_pool_size = 1` while
/// the other test connection holds the one) queues it until its own
/// `query_wait_timeout`, 120 s by default.
pub(super) const FIRST_ANSWER: std::time::Duration = std::time::Duration::from_secs(10);

/// The first statement of test connection `number` (1 or 2):
/// [`without_statement_timeout`], unanswered for at most [`FIRST_ANSWER`].
pub(super) async fn first_statement(c: &Client, number: u8) -> Result<()> {
    match super::super::silence::answer_within(FIRST_ANSWER, without_statement_timeout(c)).await {
        Ok(done) => done,
        Err(_) => Err(super::failed(VerifyProblem::NotServed {
            connection: number,
            waited: FIRST_ANSWER,
        })),
    }
}

async fn without_statement_timeout(c: &Client) -> Result<()> {
    c.batch_execute("SET statement_timeout = 0")
        .await
        .map_err(|e| {
            let why = format!("cannot turn statement_timeout off for the checks' session: {e}");
            crate::ports::error::Error::Backend(
                crate::ports::error::BackendError::new(
                    crate::ports::error::BackendErrorKind::Query,
                    why,
                )
                .with_source(e),
            )
        })
}

/// The backend pid serving `c`'s next statement.
pub(super) async fn backend_pid(c: &Client) -> Result<i32> {
    Ok(c.query_one(PID, &[]).await.map_err(query_failed)?.get(0))
}

/// The original observations: try-lock, session kept, lock recorded,
/// conflict, release. The key is free again when it returns.
pub(super) async fn observe(a: &Client, b: &Client, id: i64) -> Result<Observations> {
    let (a_took, a_pid_first) = flag_on(a, TRY_LOCK_ON, id).await?;
    let row = a.query_one(HOLDS, &[&id]).await.map_err(query_failed)?;
    let (a_pid_second, a_lock_visible): (i32, bool) = (row.get(0), row.get(1));
    // Each statement reports the backend that ran it: behind a pooler in
    // transaction mode, B's try can run on A's backend (and be granted by
    // re-entrancy), or A's unlock on another backend than its lock.
    let (b_took_while_held, b_pid) = flag_on(b, TRY_LOCK_ON, id).await?;
    if b_took_while_held {
        let _ = b.query_one(UNLOCK, &[&id]).await;
    }
    let a_pid_unlock = match a_took {
        true => flag_on(a, UNLOCK_ON, id).await?.1,
        false => a_pid_first,
    };
    let (b_took_after_release, b_pid_after) = flag_on(b, TRY_LOCK_ON, id).await?;
    if b_took_after_release {
        let _ = b.query_one(UNLOCK, &[&id]).await;
    }
    Ok(Observations {
        a_took,
        a_pid_first,
        a_pid_second,
        a_lock_visible,
        a_pid_unlock,
        b_pid,
        b_took_while_held,
        b_pid_after,
        b_took_after_release,
    })
}

/// The rest of the functions; the key is free on entry and on success.
pub(super) async fn exercise(
    a: &Client,
    b: &Client,
    id: i64,
) -> Result<std::result::Result<(), VerifyProblem>> {
    use VerifyProblem::FunctionMisbehaves as Bad;
    let bad = |function: &'static str, expected: &'static str| {
        Ok(Err(Bad {
            function: function.to_owned(),
            expected: expected.to_owned(),
        }))
    };
    // The blocking wait, exclusive and shared, while A holds exclusively.
    if !wait_for(a, LOCK, id, LONG_WAIT).await? || !holds(a, id).await? {
        return bad("pg_advisory_lock", "to take a free key");
    }
    if flag(b, TRY_LOCK_SHARED, id).await? {
        return bad(
            "pg_try_advisory_lock_shared",
            "to be refused while another session holds the key exclusively",
        );
    }
    if wait_for(b, LOCK, id, SHORT_WAIT).await? {
        return bad(
            "pg_advisory_lock",
            "to wait while another session holds the key (it returned at once, as a no-op \
             would)",
        );
    }
    if wait_for(b, LOCK_SHARED, id, SHORT_WAIT).await? {
        return bad(
            "pg_advisory_lock_shared",
            "to wait while another session holds the key exclusively",
        );
    }
    if !flag(a, UNLOCK, id).await? {
        return bad("pg_advisory_unlock", "to release a key the session holds");
    }
    // Once A let go, B's wait is granted.
    if !wait_for(b, LOCK, id, LONG_WAIT).await? || !holds(b, id).await? {
        return bad(
            "pg_advisory_lock",
            "to be granted once the holder released the key",
        );
    }
    if !flag(b, UNLOCK, id).await? {
        return bad("pg_advisory_unlock", "to release a key the session holds");
    }
    // Shared holders coexist and keep an exclusive one out.
    if !wait_for(a, LOCK_SHARED, id, LONG_WAIT).await? || !holds(a, id).await? {
        return bad("pg_advisory_lock_shared", "to take a free key");
    }
    if !flag(b, TRY_LOCK_SHARED, id).await? {
        return bad(
            "pg_try_advisory_lock_shared",
            "to share a key held in shared mode",
        );
    }
    if flag(a, TRY_LOCK, id).await? {
        return bad(
            "pg_try_advisory_lock",
            "to be refused while another session holds the key in shared mode",
        );
    }
    if !flag(a, UNLOCK_SHARED, id).await? || !flag(b, UNLOCK_SHARED, id).await? {
        return bad(
            "pg_advisory_unlock_shared",
            "to release a shared lock the session holds",
        );
    }
    // unlock_all frees what the session holds.
    if !flag(a, TRY_LOCK, id).await? {
        return bad("pg_try_advisory_lock", "to take a released key");
    }
    a.query_one(UNLOCK_ALL, &[]).await.map_err(query_failed)?;
    if holds(a, id).await? {
        return bad(
            "pg_advisory_unlock_all",
            "to release every lock of the session",
        );
    }
    if !flag(b, TRY_LOCK, id).await? {
        return bad(
            "pg_advisory_unlock_all",
            "to let another session take the key",
        );
    }
    let _ = b.query_one(UNLOCK, &[&id]).await;
    Ok(Ok(()))
}

/// Whether the server is a hot standby (in recovery).
pub(super) async fn in_recovery(c: &Client) -> Result<bool> {
    Ok(c.query_one("SELECT pg_catalog.pg_is_in_recovery()", &[])
        .await
        .map_err(query_failed)?
        .get(0))
}

/// Functions named like the advisory-lock functions outside `pg_catalog`,
/// as `schema.name(arguments)`.
pub(super) async fn look_alikes(c: &Client) -> Result<Vec<String>> {
    let rows = c
        .query(
            "SELECT n.nspname || '.' || p.proname || '(' \
                    || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')' \
               FROM pg_catalog.pg_proc p \
               JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
              WHERE n.nspname <> 'pg_catalog' \
                AND (p.proname LIKE 'pg\\_advisory%' OR p.proname LIKE 'pg\\_try\\_advisory%') \
              ORDER BY 1",
            &[],
        )
        .await
        .map_err(query_failed)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Every schema-qualified fence table of the database, when there is more
/// than one (a second `eventsource_lock_fences` earlier in some session's
/// `search_path` hands out that session's tokens from its own counters).
pub(super) async fn fence_tables(c: &Client) -> Result<Vec<String>> {
    let rows = c
        .query(
            "SELECT pg_catalog.quote_ident(n.nspname) || '.eventsource_lock_fences' \
               FROM pg_catalog.pg_class t \
               JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace \
              WHERE t.relname = 'eventsource_lock_fences' AND t.relkind IN ('r', 'p') \
              ORDER BY 1",
            &[],
        )
        .await
        .map_err(query_failed)?;
    let tables: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    Ok(if tables.len() > 1 { tables } else { Vec::new() })
}
