//! [`PostgresLockManager::verify`](super::PostgresLockManager::verify): a
//! one-off check that the server really gives session-level advisory locks.
//!
//! Two things silently break session locks while every call still succeeds:
//!
//! - an engine whose advisory functions are no-ops (CockroachDB accepts
//!   `pg_try_advisory_lock` and returns true without locking anything);
//! - a transaction-mode pooler (PgBouncer `pool_mode = transaction`): one
//!   client connection is served by different server sessions from one
//!   statement to the next, and two clients can share one server session,
//!   whose re-entrant advisory locks then "grant" both.
//!
//! The check opens two sessions exactly as the manager does (same
//! connection settings, same unqualified SQL) and takes one test key:
//! session A takes it, says which backend it runs on, and looks for its own
//! lock in `pg_locks` in a second statement; session B must run on another
//! backend and must be refused the key; after A's unlock, B must get it.

use std::fmt;
use std::time::Duration;

use tokio_postgres::Client;

use super::connect::{pg_error, Connector};
use super::settings::Settings;
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};

/// What [`verify`](super::PostgresLockManager::verify) found on a server
/// that passed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct VerifyReport {
    /// `server_version` as the server reports it.
    pub server_version: String,
    /// Backend process ids of the two test sessions (distinct).
    pub session_pids: (i32, i32),
    /// About how many locks the server's shared lock table holds, for all
    /// sessions together: `max_locks_per_transaction × (max_connections +
    /// max_prepared_transactions)`.
    pub lock_table_capacity: Option<i64>,
    /// Server settings that bound how long a vanished or frozen holder keeps
    /// its locks, as `(name, value with unit)`.
    pub settings: Vec<(String, String)>,
    /// Advice that does not make the server unusable.
    pub warnings: Vec<String>,
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "ok: advisory locks exclude across sessions, and a session keeps its server backend"
        )?;
        writeln!(f, "server version: {}", self.server_version)?;
        writeln!(
            f,
            "test sessions: backend pids {} and {}",
            self.session_pids.0, self.session_pids.1
        )?;
        if let Some(n) = self.lock_table_capacity {
            writeln!(
                f,
                "lock table capacity: about {n} locks for the whole server"
            )?;
        }
        for (name, value) in &self.settings {
            writeln!(f, "{name} = {value}")?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

/// Why a server cannot give safe session locks. Carried as the
/// [`source`](std::error::Error::source) of the
/// [`BackendErrorKind::NotPostgres`] error that `verify` returns, so callers
/// can downcast to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyProblem {
    /// One connection ran two statements on two server sessions.
    #[error(
        "one connection ran two statements on two different server sessions (backend pid {first}, \
         then {second}): a transaction-mode pooler (such as PgBouncer with pool_mode = transaction) \
         is in between, and session advisory locks are not safe behind it; connect to PostgreSQL \
         directly or through a session-mode pool"
    )]
    SessionNotKept {
        /// The backend pid of the first statement.
        first: i32,
        /// The backend pid of the second statement.
        second: i32,
    },
    /// Two connections were served by one server session.
    #[error(
        "two connections were served by the same server session (backend pid {pid}): a pooler \
         shares server sessions between clients, and advisory locks are re-entrant per session, \
         so both would get the same lock; connect to PostgreSQL directly or through a \
         session-mode pool"
    )]
    SharedBackend {
        /// The backend pid both connections reported.
        pid: i32,
    },
    /// The lock function said yes, but no lock exists.
    #[error(
        "pg_try_advisory_lock returned true but no advisory lock shows in pg_locks: the advisory \
         lock functions do nothing on this server (CockroachDB, for one, accepts them without \
         locking)"
    )]
    LockNotRecorded,
    /// A second session got a lock the first one held.
    #[error(
        "a second session took the advisory lock the first one held: advisory locks do not \
         exclude on this server"
    )]
    NoConflict,
    /// The first session could not take a fresh, random test key.
    #[error(
        "the first session could not take a free test lock (pg_try_advisory_lock returned false)"
    )]
    TestLockRefused,
    /// The unlock of the test key did not free it.
    #[error("after pg_advisory_unlock, a second session still could not take the test lock")]
    NotReleased,
}

/// What the two test sessions saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Observations {
    /// A: `pg_try_advisory_lock(k)` on a fresh key.
    pub(crate) a_took: bool,
    /// A: backend pid of that statement.
    pub(crate) a_pid_first: i32,
    /// A: backend pid of the next statement.
    pub(crate) a_pid_second: i32,
    /// A: whether that next statement found A's lock in `pg_locks`.
    pub(crate) a_lock_visible: bool,
    /// B: backend pid.
    pub(crate) b_pid: i32,
    /// B: `pg_try_advisory_lock(k)` while A holds it.
    pub(crate) b_took_while_held: bool,
    /// B: `pg_try_advisory_lock(k)` after A's unlock.
    pub(crate) b_took_after_release: bool,
}

/// The verdict on what the sessions saw; the first problem found wins.
pub(crate) fn judge(o: &Observations) -> std::result::Result<(), VerifyProblem> {
    if !o.a_took {
        return Err(VerifyProblem::TestLockRefused);
    }
    if o.a_pid_first != o.a_pid_second {
        return Err(VerifyProblem::SessionNotKept {
            first: o.a_pid_first,
            second: o.a_pid_second,
        });
    }
    if o.b_pid == o.a_pid_first {
        return Err(VerifyProblem::SharedBackend { pid: o.b_pid });
    }
    if !o.a_lock_visible {
        return Err(VerifyProblem::LockNotRecorded);
    }
    if o.b_took_while_held {
        return Err(VerifyProblem::NoConflict);
    }
    if !o.b_took_after_release {
        return Err(VerifyProblem::NotReleased);
    }
    Ok(())
}

/// Settings read from `pg_settings` for the report.
const REPORTED: [&str; 6] = [
    "idle_session_timeout",
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "tcp_keepalives_count",
    "tcp_user_timeout",
    "client_connection_check_interval",
];

/// Above this keepalive idle time (s) the server is slow to notice a
/// client lost to the network.
const MAX_KEEPALIVE_IDLE_S: i64 = 300;

/// Advice from the server's settings (values in the units of `pg_settings`:
/// ms for the timeouts, s for keepalives).
pub(crate) fn advice(
    settings: &[(String, i64)],
    liveness_interval: Duration,
    budget: usize,
    capacity: Option<i64>,
) -> Vec<String> {
    let get = |name: &str| settings.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let mut out = Vec::new();
    match get("idle_session_timeout") {
        Some(ms) if ms > 0 && (ms as u128) <= 2 * liveness_interval.as_millis() => {
            out.push(format!(
            "idle_session_timeout ({ms} ms) is not above twice the manager's liveness interval \
             ({} ms): lock sessions may be cut while idle and their locks lost",
            liveness_interval.as_millis()
        ))
        }
        Some(0) | None => out.push(
            "idle_session_timeout is off: a frozen holder (stopped, not dead) keeps its locks \
             until it resumes; set it for the locking role (ALTER ROLE ... SET \
             idle_session_timeout) above the liveness interval to turn sessions into leases"
                .to_owned(),
        ),
        Some(_) => {}
    }
    // On a TCP session the server shows the socket's value: the kernel
    // default (7200 s) when the setting is 0.
    match get("tcp_keepalives_idle") {
        Some(s) if s > 0 && s <= MAX_KEEPALIVE_IDLE_S => {}
        shown => out.push(format!(
            "tcp_keepalives_idle is {}: the server frees the locks of a client cut off by the \
             network only that late; set tcp_keepalives_idle, _interval and _count (and \
             tcp_user_timeout) on the server",
            match shown {
                Some(s) if s > 0 => format!("{s} s"),
                _ => "the kernel default (usually 2 hours)".to_owned(),
            }
        )),
    }
    if let Some(cap) = capacity {
        if (budget as i64) > cap / 2 {
            out.push(format!(
                "the manager's budget ({budget} locks) is over half the server's lock table \
                 (about {cap}); when that table fills, the whole server refuses new connections"
            ));
        }
    }
    out
}

fn query_failed(e: tokio_postgres::Error) -> Error {
    Error::Backend(pg_error(e, BackendErrorKind::Query))
}

async fn observe(a: &Client, b: &Client, lock_id: i64) -> Result<Observations> {
    let row = a
        .query_one(
            "SELECT pg_try_advisory_lock($1), pg_backend_pid()",
            &[&lock_id],
        )
        .await
        .map_err(query_failed)?;
    let (a_took, a_pid_first): (bool, i32) = (row.get(0), row.get(1));
    let row = a
        .query_one(
            "SELECT pg_backend_pid(), EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
             AND objsubid = 1 AND granted AND pid = pg_backend_pid() \
             AND ((classid::int8 << 32) | objid::int8) = $1)",
            &[&lock_id],
        )
        .await
        .map_err(query_failed)?;
    let (a_pid_second, a_lock_visible): (i32, bool) = (row.get(0), row.get(1));
    let row = b
        .query_one(
            "SELECT pg_try_advisory_lock($1), pg_backend_pid()",
            &[&lock_id],
        )
        .await
        .map_err(query_failed)?;
    let (b_took_while_held, b_pid): (bool, i32) = (row.get(0), row.get(1));
    if b_took_while_held {
        let _ = b
            .query_one("SELECT pg_advisory_unlock($1)", &[&lock_id])
            .await;
    }
    if a_took {
        a.query_one("SELECT pg_advisory_unlock($1)", &[&lock_id])
            .await
            .map_err(query_failed)?;
    }
    let b_took_after_release: bool = b
        .query_one("SELECT pg_try_advisory_lock($1)", &[&lock_id])
        .await
        .map_err(query_failed)?
        .get(0);
    if b_took_after_release {
        let _ = b
            .query_one("SELECT pg_advisory_unlock($1)", &[&lock_id])
            .await;
    }
    Ok(Observations {
        a_took,
        a_pid_first,
        a_pid_second,
        a_lock_visible,
        b_pid,
        b_took_while_held,
        b_took_after_release,
    })
}

async fn server_facts(
    client: &Client,
) -> Result<(
    String,
    Vec<(String, i64)>,
    Vec<(String, String)>,
    Option<i64>,
)> {
    let version: String = client
        .query_one("SELECT current_setting('server_version')", &[])
        .await
        .map_err(query_failed)?
        .get(0);
    let names: Vec<String> = REPORTED.iter().map(|s| s.to_string()).collect();
    let rows = client
        .query(
            "SELECT name, setting, coalesce(unit, '') FROM pg_settings WHERE name = ANY($1) \
             OR name IN ('max_locks_per_transaction', 'max_connections', 'max_prepared_transactions')",
            &[&names],
        )
        .await
        .map_err(query_failed)?;
    let mut numeric = Vec::new();
    let mut shown = Vec::new();
    for r in rows {
        let (name, setting, unit): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        if let Ok(v) = setting.parse::<i64>() {
            numeric.push((name.clone(), v));
        }
        if REPORTED.contains(&name.as_str()) {
            shown.push((name, format!("{setting}{unit}")));
        }
    }
    shown.sort();
    let get = |n: &str| numeric.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    let capacity = match (
        get("max_locks_per_transaction"),
        get("max_connections"),
        get("max_prepared_transactions"),
    ) {
        (Some(l), Some(c), p) => Some(l * (c + p.unwrap_or(0))),
        _ => None,
    };
    Ok((version, numeric, shown, capacity))
}

/// Runs the check; see the module docs.
pub(crate) async fn verify(connector: &Connector, settings: &Settings) -> Result<VerifyReport> {
    let a = connector.connect().await.map_err(Error::Backend)?;
    let b = connector.connect().await.map_err(Error::Backend)?;
    let lock_id = crate::lock_id_for_key(&format!("eventsource:verify:{}", uuid::Uuid::new_v4()));
    let seen = observe(&a.client, &b.client, lock_id).await?;
    if let Err(problem) = judge(&seen) {
        tracing::warn!(%problem, "the server cannot give safe session locks");
        return Err(Error::Backend(
            BackendError::new(BackendErrorKind::NotPostgres, problem.to_string())
                .with_source(problem),
        ));
    }
    let (server_version, numeric, shown, capacity) = server_facts(&a.client).await?;
    Ok(VerifyReport {
        server_version,
        session_pids: (seen.a_pid_first, seen.b_pid),
        lock_table_capacity: capacity,
        settings: shown,
        warnings: advice(
            &numeric,
            settings.liveness_interval,
            settings.max_held_locks,
            capacity,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Observations {
        Observations {
            a_took: true,
            a_pid_first: 10,
            a_pid_second: 10,
            a_lock_visible: true,
            b_pid: 11,
            b_took_while_held: false,
            b_took_after_release: true,
        }
    }

    #[test]
    fn a_real_postgres_passes() {
        assert_eq!(judge(&healthy()), Ok(()));
    }

    #[test]
    fn transaction_pooler_that_moves_a_connection_is_caught() {
        let o = Observations {
            a_pid_second: 12,
            // Behind a pooler the lock may or may not be seen: either way
            // the moving session is the diagnosis.
            a_lock_visible: false,
            ..healthy()
        };
        let err = judge(&o).unwrap_err();
        assert_eq!(
            err,
            VerifyProblem::SessionNotKept {
                first: 10,
                second: 12
            }
        );
        assert!(err.to_string().contains("pool_mode = transaction"), "{err}");
    }

    #[test]
    fn pooler_that_shares_one_backend_is_caught() {
        // Re-entrancy makes B "get" the lock too.
        let o = Observations {
            b_pid: 10,
            b_took_while_held: true,
            ..healthy()
        };
        let err = judge(&o).unwrap_err();
        assert_eq!(err, VerifyProblem::SharedBackend { pid: 10 });
        assert!(err.to_string().contains("same server session"), "{err}");
    }

    #[test]
    fn no_op_advisory_functions_are_caught() {
        // CockroachDB: true for everyone, nothing in pg_locks.
        let o = Observations {
            a_lock_visible: false,
            b_took_while_held: true,
            ..healthy()
        };
        let err = judge(&o).unwrap_err();
        assert_eq!(err, VerifyProblem::LockNotRecorded);
        assert!(err.to_string().contains("do nothing"), "{err}");
        // Recorded but not excluding (an engine that fakes pg_locks).
        let o = Observations {
            b_took_while_held: true,
            ..healthy()
        };
        assert_eq!(judge(&o), Err(VerifyProblem::NoConflict));
    }

    #[test]
    fn refused_test_lock_and_stuck_release_are_caught() {
        let o = Observations {
            a_took: false,
            ..healthy()
        };
        assert_eq!(judge(&o), Err(VerifyProblem::TestLockRefused));
        let o = Observations {
            b_took_after_release: false,
            ..healthy()
        };
        assert_eq!(judge(&o), Err(VerifyProblem::NotReleased));
    }

    #[test]
    fn advice_names_the_settings_that_bound_a_lost_holder() {
        let s = |v: &[(&str, i64)]| {
            v.iter()
                .map(|(n, x)| (n.to_string(), *x))
                .collect::<Vec<_>>()
        };
        let interval = Duration::from_millis(500);
        // Defaults: no lease, kernel keepalives (shown as 0 or as 7200).
        for idle in [0, 7200] {
            let w = advice(
                &s(&[("idle_session_timeout", 0), ("tcp_keepalives_idle", idle)]),
                interval,
                100,
                Some(6400),
            );
            assert_eq!(w.len(), 2, "{w:?}");
            assert!(w[0].contains("frozen holder") && w[1].contains("tcp_keepalives_idle"));
        }
        // A lease too short for the pings.
        let w = advice(
            &s(&[("idle_session_timeout", 800), ("tcp_keepalives_idle", 5)]),
            interval,
            100,
            Some(6400),
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("800 ms"));
        // Recommended settings, budget within the table: no advice.
        let w = advice(
            &s(&[("idle_session_timeout", 30_000), ("tcp_keepalives_idle", 5)]),
            interval,
            100,
            Some(6400),
        );
        assert!(w.is_empty(), "{w:?}");
        // A budget that could fill the server's lock table.
        let w = advice(
            &s(&[("idle_session_timeout", 30_000), ("tcp_keepalives_idle", 5)]),
            interval,
            4096,
            Some(6400),
        );
        assert!(w[0].contains("lock table"), "{w:?}");
    }
}
