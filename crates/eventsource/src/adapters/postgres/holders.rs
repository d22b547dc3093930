//! Who holds which advisory lock, and who waits for it: [`query_holders`].
//!
//! [`DistributedLock::is_held`](crate::DistributedLock::is_held) only answers
//! for its own manager. This inspection reads `pg_locks` joined with
//! `pg_stat_activity`, so it sees every session of the current database:
//! other processes, other hosts, other languages (the Python reference
//! derives the same lock ids).

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_postgres::Client;

use super::connect::pg_error;
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
    /// The string key, when the caller named it (ids cannot be turned back
    /// into keys).
    pub key: Option<String>,
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
    /// and frees its locks).
    pub pid: i32,
    /// The lock mode, as `pg_locks.mode` names it (`ExclusiveLock`, `ShareLock`).
    pub mode: String,
    /// True for a holder, false for a waiter.
    pub granted: bool,
    /// The session's `application_name`.
    pub application_name: Option<String>,
    /// The lock manager's holder id, read from an `application_name` of the
    /// form `eventsource/<holder_id>` (PostgreSQL keeps 63 bytes of it).
    pub holder_id: Option<String>,
    /// The client's address (`None` for Unix sockets).
    pub client_addr: Option<String>,
    /// When the session connected.
    pub backend_start: Option<DateTime<Utc>>,
    /// For a waiter, when it started waiting (PostgreSQL 14 and later). For
    /// a holder, when its session was last active (`xact_start`, else
    /// `state_change`): PostgreSQL does not record when a lock was granted,
    /// so this is the acquisition time only for a session that has been
    /// idle since.
    pub since: Option<DateTime<Utc>>,
}

/// Parses the holder id out of an `application_name` set by a lock manager.
pub(crate) fn holder_id_from_application_name(name: &str) -> Option<String> {
    name.strip_prefix(APPLICATION_NAME_PREFIX)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// Advisory locks of the current database: the bigint form (`objsubid =
/// 1`), and, when no ids are asked for, the two-int form (`objsubid = 2`).
/// `waitstart` is read through `to_jsonb` so that the query also runs on
/// servers older than PostgreSQL 14, which lack the column.
const HOLDERS_SQL: &str = "\
SELECT ((l.classid::int8 << 32) | l.objid::int8) AS lock_id,
       l.objsubid::int4 AS objsubid,
       (l.classid::int8 - CASE WHEN l.classid::int8 > 2147483647 THEN 4294967296 ELSE 0 END)::int4 AS key1,
       (l.objid::int8 - CASE WHEN l.objid::int8 > 2147483647 THEN 4294967296 ELSE 0 END)::int4 AS key2,
       l.pid,
       l.mode,
       l.granted,
       (to_jsonb(l) ->> 'waitstart')::timestamptz AS waitstart,
       a.application_name,
       host(a.client_addr) AS client_addr,
       a.backend_start,
       COALESCE(a.xact_start, a.state_change) AS active_since
  FROM pg_catalog.pg_locks l
  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory'
   AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
   AND (($1::int8[] IS NULL AND l.objsubid IN (1, 2))
        OR (l.objsubid = 1 AND ((l.classid::int8 << 32) | l.objid::int8) = ANY($1::int8[])))
 ORDER BY objsubid, lock_id, l.granted DESC, waitstart NULLS LAST, l.pid";

/// Lists the advisory locks of the current database that are held or
/// waited for, with their holders and waiters (in queue order).
///
/// With an empty `keys`, every advisory lock is listed: the bigint form
/// (`key` is `None`, since an id cannot be turned back into its key), then
/// the two-int form (with [`int_pair`](AdvisoryLock::int_pair)). Otherwise
/// only the bigint-form locks of those keys are listed, each with its `key`;
/// a key nobody holds or waits for is left out. Locks are ordered by form,
/// then id.
///
/// Works on any session of the database; it takes no lock and changes
/// nothing. Errors are [`Error::Backend`].
///
/// # Cancel safety
///
/// Cancel safe: the query only reads.
pub async fn query_holders(client: &Client, keys: &[&str]) -> Result<Vec<AdvisoryLock>> {
    let named: Vec<(i64, &str)> = keys.iter().map(|k| (lock_id_for_key(k), *k)).collect();
    let filter: Option<Vec<i64>> = if named.is_empty() {
        None
    } else {
        Some(named.iter().map(|(id, _)| *id).collect())
    };
    let rows = client
        .query(HOLDERS_SQL, &[&filter])
        .await
        .map_err(|e| Error::Backend(pg_error(e, BackendErrorKind::Query)))?;

    let mut locks: Vec<AdvisoryLock> = Vec::new();
    for row in rows {
        let lock_id: i64 = row.get("lock_id");
        let int_pair = match row.get::<_, i32>("objsubid") {
            2 => Some((row.get("key1"), row.get("key2"))),
            _ => None,
        };
        let granted: bool = row.get("granted");
        let application_name: Option<String> = row.get("application_name");
        let waitstart: Option<DateTime<Utc>> = row.get("waitstart");
        let active_since: Option<DateTime<Utc>> = row.get("active_since");
        let session = LockSession {
            pid: row.get("pid"),
            mode: row.get("mode"),
            granted,
            holder_id: application_name
                .as_deref()
                .and_then(holder_id_from_application_name),
            application_name,
            client_addr: row.get("client_addr"),
            backend_start: row.get("backend_start"),
            since: if granted { active_since } else { waitstart },
        };
        let lock = match locks.last_mut() {
            Some(last) if last.lock_id == lock_id && last.int_pair == int_pair => last,
            _ => {
                locks.push(AdvisoryLock {
                    lock_id,
                    int_pair,
                    key: named
                        .iter()
                        .find(|(id, _)| *id == lock_id && int_pair.is_none())
                        .map(|(_, k)| (*k).to_owned()),
                    holders: Vec::new(),
                    waiters: Vec::new(),
                });
                locks.last_mut().expect("just pushed")
            }
        };
        if granted {
            lock.holders.push(session);
        } else {
            lock.waiters.push(session);
        }
    }
    Ok(locks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_id_comes_from_prefixed_application_names_only() {
        assert_eq!(
            holder_id_from_application_name("eventsource/host-a:42").as_deref(),
            Some("host-a:42")
        );
        assert_eq!(holder_id_from_application_name("eventsource"), None);
        assert_eq!(holder_id_from_application_name("eventsource/"), None);
        assert_eq!(holder_id_from_application_name("psql"), None);
    }
}
