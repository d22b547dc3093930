//! Who holds which advisory lock, and who waits for it: [`query_holders`],
//! and [`HoldersQuery`] for repeated views (`eventsource lock top`, `lock
//! holders --watch`).
//!
//! [`DistributedLock::is_held`](crate::DistributedLock::is_held) only answers
//! for its own manager. This inspection reads `pg_locks` joined with
//! `pg_stat_activity` in one statement, so it sees every session of the
//! current database: other processes, other hosts, other languages (the
//! Python reference derives the same lock ids).

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Client;

use super::fencing::FENCE_TABLE;
use crate::adapters::postgres::connection::connect::pg_error;
use crate::adapters::postgres::connection::decode_holder_id;
use crate::ports::error::{BackendErrorKind, Error, Result};
use crate::ports::lock_id::lock_id_for_key;

/// The prefix the lock managers put before their holder id in
/// `application_name`.
const APPLICATION_NAME_PREFIX: &str = "eventsource/";

/// One advisory lock of the current database, with its holders and waiters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdvisoryLock {
    /// The 64-bit advisory-lock id (for a two-int lock, the same two 32-bit
    /// halves read as one number: see [`int_pair`](Self::int_pair)).
    pub lock_id: i64,
    /// For a lock of the two-int form, `pg_advisory_lock(key1 int, key2
    /// int)`, its two keys; `None` for the bigint form, which the lock
    /// managers use. The two forms are distinct locks even where their bits
    /// agree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub int_pair: Option<(i32, i32)>,
    /// The string key, when the caller named it, else the key the fencing
    /// table records for this id (ids cannot be turned back into keys),
    /// when that key's id is this lock's: a row whose key does not match
    /// its `lock_id` (a hand-written one) names nothing.
    pub key: Option<String>,
    /// The lock's current fencing token, from the fencing table
    /// ([`FENCE_TABLE`]) when it exists, the query was asked to read it
    /// ([`HoldersQuery::with_fences`]) and it has a row for this id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
    /// Sessions that hold the lock (usually one; several for shared locks).
    pub holders: Vec<LockSession>,
    /// Sessions waiting for the lock, first in line first.
    pub waiters: Vec<LockSession>,
}

/// A session that holds or waits for an advisory lock.
///
/// The `pg_stat_activity` fields are `None` when the server hides them
/// (sessions of other roles, without `pg_read_all_stats`) or when they do not
/// apply (`client_addr` of a Unix-socket session).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockSession {
    /// The backend process id (`pg_terminate_backend(pid)` ends the session
    /// and frees its locks); 0 for a prepared transaction, which has none
    /// (`ROLLBACK PREPARED` frees its locks).
    pub pid: i32,
    /// The lock mode, as `pg_locks.mode` names it (`ExclusiveLock`, `ShareLock`).
    pub mode: String,
    /// True for a holder, false for a waiter.
    pub granted: bool,
    /// The session's `application_name`.
    pub application_name: Option<String>,
    /// The lock manager's holder id, read from an `application_name` of the
    /// form `eventsource/<holder_id>` (PostgreSQL keeps 63 bytes of it),
    /// with the percent-encoding of bytes outside printable ASCII undone.
    pub holder_id: Option<String>,
    /// The client's address (`None` for Unix sockets).
    pub client_addr: Option<String>,
    /// When the session connected. For a holder, the earliest the lock can
    /// have been granted: PostgreSQL does not record grant times, and this
    /// bound, unlike [`since`](Self::since), does not move while the lock is
    /// held.
    pub backend_start: Option<DateTime<Utc>>,
    /// For a waiter, when it started waiting (`pg_locks.waitstart`,
    /// PostgreSQL 14 and later). For a holder, when its session was last
    /// active (`xact_start`, else `state_change`): the acquisition time
    /// only for a session that has been idle since. A lock manager's
    /// sessions run a liveness statement twice a second, so for them it
    /// says "just now" however long the lock has been held.
    pub since: Option<DateTime<Utc>>,
    /// For a waiter, the sessions it waits behind (`pg_blocking_pids`: the
    /// holders, and waiters queued ahead in a conflicting mode); empty for
    /// a holder.
    pub blocked_by: Vec<i32>,
}

/// Whether a [`HoldersQuery`] reads fencing tokens, and from where.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FenceTable {
    /// Not looked up ([`HoldersQuery::with_fences`] not called).
    NotAsked,
    /// No [`FENCE_TABLE`] in the session's `search_path`.
    Missing,
    /// This role may not read the table (no `SELECT`): no tokens shown.
    Unreadable {
        /// The schema-qualified table name.
        table: String,
    },
    /// Joined: each lock shows its current token.
    Joined {
        /// The schema-qualified table name.
        table: String,
    },
}

/// Parses the holder id out of an `application_name` set by a lock manager,
/// undoing its percent-encoding of bytes PostgreSQL would turn into `?`.
pub(crate) fn holder_id_from_application_name(name: &str) -> Option<String> {
    name.strip_prefix(APPLICATION_NAME_PREFIX)
        .filter(|id| !id.is_empty())
        .map(decode_holder_id)
}

/// Advisory locks of the current database: the bigint form (`objsubid =
/// 1`), and, when no ids are asked for, the two-int form (`objsubid = 2`).
/// `waitstart` is read through `to_jsonb` so that the query also runs on
/// servers older than PostgreSQL 14, which lack the column, and for waiters
/// only: converting every row took most of the query's time with 10,000
/// locks held (169 ms against 45 ms). `{FENCE}` is replaced by the fence
/// columns and join, or by typed NULLs.
const HOLDERS_SQL: &str = "\
SELECT ((l.classid::int8 << 32) | l.objid::int8) AS lock_id,
       l.objsubid::int4 AS objsubid,
       (l.classid::int8 - CASE WHEN l.classid::int8 > 2147483647 THEN 4294967296 ELSE 0 END)::int4 AS key1,
       (l.objid::int8 - CASE WHEN l.objid::int8 > 2147483647 THEN 4294967296 ELSE 0 END)::int4 AS key2,
       l.pid,
       l.mode,
       l.granted,
       CASE WHEN l.granted THEN NULL ELSE (to_jsonb(l) ->> 'waitstart')::timestamptz END AS waitstart,
       CASE WHEN l.granted THEN NULL ELSE pg_catalog.pg_blocking_pids(l.pid) END AS blocked_by,
       a.application_name,
       host(a.client_addr) AS client_addr,
       a.backend_start,
       COALESCE(a.xact_start, a.state_change) AS active_since{FENCE}
 WHERE l.locktype = 'advisory'
   AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
   AND (($1::int8[] IS NULL AND l.objsubid IN (1, 2))
        OR (l.objsubid = 1 AND ((l.classid::int8 << 32) | l.objid::int8) = ANY($1::int8[])))
 ORDER BY objsubid, lock_id, l.granted DESC, waitstart NULLS LAST, l.pid";

const FROM: &str = "
  FROM pg_catalog.pg_locks l
  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid";

/// Finds [`FENCE_TABLE`] through the `search_path`, as a quoted qualified
/// name, and whether this role may read it.
const FENCE_TABLE_SQL: &str = "\
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname),
       pg_catalog.has_table_privilege(c.oid, 'SELECT')
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = pg_catalog.to_regclass($1)";

fn holders_sql(fences: &FenceTable) -> String {
    let fence = match fences {
        FenceTable::Joined { table } => format!(
            ",\n       NULLIF(f.fence, 0)::int8 AS fence,\n       f.key::text AS fence_key{FROM}\n  \
             LEFT JOIN {table} f ON l.objsubid = 1 AND f.lock_id = ((l.classid::int8 << 32) | l.objid::int8)\n"
        ),
        _ => format!(",\n       NULL::int8 AS fence,\n       NULL::text AS fence_key{FROM}\n"),
    };
    HOLDERS_SQL.replace("{FENCE}", &fence)
}

/// One listing of advisory locks, to run once or again and again on one
/// session: which locks (every one, or those of some keys), and whether to
/// join the fencing table. Building it costs nothing; [`with_fences`](Self::with_fences)
/// looks the table up once, and each [`run`](Self::run) is then a single
/// statement (one round trip) however many locks there are.
///
/// ```no_run
/// # async fn demo(client: &tokio_postgres::Client) -> pgcoord::Result<()> {
/// use pgcoord::inspect::HoldersQuery;
///
/// let query = HoldersQuery::all().with_fences(client).await?;
/// for lock in query.run(client).await? {
///     println!("{} fence {:?}: {} waiting", lock.lock_id, lock.fence, lock.waiters.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HoldersQuery {
    named: Vec<(i64, String)>,
    fences: FenceTable,
    sql: String,
}

impl HoldersQuery {
    /// Every advisory lock of the current database, both forms.
    pub fn all() -> Self {
        Self::keys(&[] as &[&str])
    }

    /// The bigint-form locks of `keys`, each with its `key` (every lock if
    /// `keys` is empty, as [`all`](Self::all)).
    pub fn keys<S: AsRef<str>>(keys: &[S]) -> Self {
        let fences = FenceTable::NotAsked;
        Self {
            named: keys
                .iter()
                .map(|k| (lock_id_for_key(k.as_ref()), k.as_ref().to_owned()))
                .collect(),
            sql: holders_sql(&fences),
            fences,
        }
    }

    /// Looks up [`FENCE_TABLE`] in the session's `search_path` (one
    /// statement) and, when it exists and is readable, joins it so that each
    /// lock shows its current token ([`AdvisoryLock::fence`]) and, when the
    /// caller did not name it, the key the table records. The lookup is not
    /// repeated: a table created later is not seen by this query, and one
    /// dropped later makes [`run`](Self::run) fail (SQLSTATE 42P01).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, and consumes nothing of the caller's.
    pub async fn with_fences(mut self, client: &Client) -> Result<Self> {
        let rows = client
            .query_typed(FENCE_TABLE_SQL, &[(&FENCE_TABLE, Type::TEXT)])
            .await
            .map_err(|e| Error::Backend(pg_error(e, BackendErrorKind::Query)))?;
        self.fences = match rows.first() {
            None => FenceTable::Missing,
            Some(row) if row.get::<_, bool>(1) => FenceTable::Joined { table: row.get(0) },
            Some(row) => FenceTable::Unreadable { table: row.get(0) },
        };
        self.sql = holders_sql(&self.fences);
        Ok(self)
    }

    /// Whether and from where this query reads fencing tokens.
    pub fn fences(&self) -> &FenceTable {
        &self.fences
    }

    /// Lists the locks: see [`query_holders`] for what is listed and in
    /// which order. One statement, which takes no lock and changes nothing.
    /// Errors are [`Error::Backend`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the query only reads.
    pub async fn run(&self, client: &Client) -> Result<Vec<AdvisoryLock>> {
        let filter: Option<Vec<i64>> = if self.named.is_empty() {
            None
        } else {
            Some(self.named.iter().map(|(id, _)| *id).collect())
        };
        let params: [(&(dyn ToSql + Sync), Type); 1] = [(&filter, Type::INT8_ARRAY)];
        let rows = client
            .query_typed(&self.sql, &params)
            .await
            .map_err(|e| Error::Backend(pg_error(e, BackendErrorKind::Query)))?;
        Ok(self.group(rows))
    }

    /// Rows (by form, id, holders first, waiters in queue order) to locks.
    fn group(&self, rows: Vec<tokio_postgres::Row>) -> Vec<AdvisoryLock> {
        let mut locks: Vec<AdvisoryLock> = Vec::new();
        for row in rows {
            let lock_id: i64 = row.get("lock_id");
            let int_pair = match row.get::<_, i32>("objsubid") {
                2 => Some((row.get("key1"), row.get("key2"))),
                _ => None,
            };
            let session = session_from(&row);
            let lock = match locks.last_mut() {
                Some(last) if last.lock_id == lock_id && last.int_pair == int_pair => last,
                _ => {
                    let named = self
                        .named
                        .iter()
                        .find(|(id, _)| *id == lock_id && int_pair.is_none())
                        .map(|(_, k)| k.clone());
                    // The fence table's label only when it is this lock's
                    // key: anyone who may write the table could label any
                    // lock with any key.
                    let recorded = row
                        .get::<_, Option<String>>("fence_key")
                        .filter(|k| int_pair.is_none() && lock_id_for_key(k) == lock_id);
                    locks.push(AdvisoryLock {
                        lock_id,
                        int_pair,
                        key: named.or(recorded),
                        fence: row.get("fence"),
                        holders: Vec::new(),
                        waiters: Vec::new(),
                    });
                    locks.last_mut().expect("just pushed")
                }
            };
            if session.granted {
                lock.holders.push(session);
            } else {
                lock.waiters.push(session);
            }
        }
        locks
    }
}

fn session_from(row: &tokio_postgres::Row) -> LockSession {
    let granted: bool = row.get("granted");
    let application_name: Option<String> = row.get("application_name");
    let waitstart: Option<DateTime<Utc>> = row.get("waitstart");
    let active_since: Option<DateTime<Utc>> = row.get("active_since");
    LockSession {
        // NULL for a prepared transaction (`PREPARE TRANSACTION`) holding a
        // transaction-level advisory lock.
        pid: row.get::<_, Option<i32>>("pid").unwrap_or(0),
        mode: row.get("mode"),
        granted,
        holder_id: application_name
            .as_deref()
            .and_then(holder_id_from_application_name),
        application_name,
        client_addr: row.get("client_addr"),
        backend_start: row.get("backend_start"),
        since: if granted { active_since } else { waitstart },
        blocked_by: row
            .get::<_, Option<Vec<i32>>>("blocked_by")
            .unwrap_or_default(),
    }
}

/// Lists the advisory locks of the current database that are held or
/// waited for, with their holders and waiters (in queue order).
///
/// With an empty `keys`, every advisory lock is listed: the bigint form
/// (`key` is `None`, since an id cannot be turned back into its key), then
/// the two-int form (with [`int_pair`](AdvisoryLock::int_pair)). Otherwise
/// only the bigint-form locks of those keys are listed, each with its `key`;
/// a key nobody holds or waits for is left out. Locks are ordered by form,
/// then id. Fencing tokens are not read: see [`HoldersQuery::with_fences`].
///
/// Works on any session of the database; it takes no lock and changes
/// nothing; one statement. Errors are [`Error::Backend`].
///
/// # Cancel safety
///
/// Cancel safe: the query only reads.
pub async fn query_holders(client: &Client, keys: &[&str]) -> Result<Vec<AdvisoryLock>> {
    HoldersQuery::keys(keys).run(client).await
}

#[cfg(test)]
#[path = "holders_tests.rs"]
mod tests;
