//! [`PostgresLockManager::verify`](crate::adapters::postgres::PostgresLockManager::verify): a
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
//! A third, a hot standby, gives locks that exclude only its own sessions,
//! not holders on the primary: `pg_is_in_recovery()` fails the check.
//!
//! The check opens two sessions exactly as the manager does (same
//! connection settings) and takes one test key: session A takes it, says
//! which backend it runs on, and looks for its own lock in `pg_locks` in a
//! second statement; session B must run on another backend and must be
//! refused the key; after A's unlock, B must get it. Then every other
//! advisory function a manager may call is exercised (see `probe`), the
//! blocking wait included. Every call is `pg_catalog.`-qualified, as the
//! manager's are, so a look-alike function earlier in `search_path` is not
//! what is checked; such look-alikes are reported as a warning, since
//! other clients calling the functions unqualified would get them.

mod advice;
mod probe;
mod problem;
mod replication;
mod verdict;

pub use problem::VerifyProblem;
pub use replication::Replication;

use std::fmt;

use tokio_postgres::Client;

use self::advice::{advice, REPORTED};
use self::verdict::{judge, Observations};
use super::settings::Settings;
use crate::adapters::postgres::connection::connect::{pg_error, Connector};
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};

/// What [`verify`](crate::adapters::postgres::PostgresLockManager::verify) found on a server
/// that passed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct VerifyReport {
    /// `server_version` as the server reports it.
    pub server_version: String,
    /// Backend process ids of the two test sessions (distinct).
    pub session_pids: (i32, i32),
    /// The server both sessions reached, as it names itself: its address
    /// and port (`local` for a Unix socket), then when it started. With
    /// several hosts in the URL, which one answered.
    pub server: String,
    /// How many locks the server's shared lock table is sized for, for all
    /// sessions together: `max_locks_per_transaction × (max_connections +
    /// autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders +
    /// max_prepared_transactions)`. A lower bound: more fit while the
    /// server's spare shared memory lasts.
    pub lock_table_capacity: Option<i64>,
    /// Server settings that bound how long a vanished or frozen holder keeps
    /// its locks, as `(name, value with unit)`.
    pub settings: Vec<(String, String)>,
    /// The replication the server shows, and what fencing guarantees there.
    pub replication: Replication,
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
        writeln!(f, "server: {}", self.server)?;
        writeln!(
            f,
            "test sessions: backend pids {} and {}",
            self.session_pids.0, self.session_pids.1
        )?;
        if let Some(n) = self.lock_table_capacity {
            writeln!(
                f,
                "lock table: sized for {n} locks for the whole server (more fit while spare \
                 shared memory lasts)"
            )?;
        }
        for (name, value) in &self.settings {
            writeln!(f, "{name} = {value}")?;
        }
        writeln!(f, "{}", self.replication)?;
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

fn query_failed(e: tokio_postgres::Error) -> Error {
    Error::Backend(pg_error(e, BackendErrorKind::Query))
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
        .query_one("SELECT pg_catalog.current_setting('server_version')", &[])
        .await
        .map_err(query_failed)?
        .get(0);
    let names: Vec<String> = REPORTED.iter().map(|s| s.to_string()).collect();
    let rows = client
        .query(
            "SELECT name, setting, COALESCE(unit, '') FROM pg_catalog.pg_settings \
             WHERE name = ANY($1) OR name IN ('max_locks_per_transaction', 'max_connections', \
             'max_prepared_transactions', 'autovacuum_max_workers', 'max_worker_processes', \
             'max_wal_senders')",
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
    // PostgreSQL sizes the table for every backend slot (MaxBackends:
    // connections, autovacuum workers and launcher, background workers, WAL
    // senders) plus prepared transactions.
    let capacity = match (get("max_locks_per_transaction"), get("max_connections")) {
        (Some(l), Some(c)) => {
            let others: i64 = [
                "autovacuum_max_workers",
                "max_worker_processes",
                "max_wal_senders",
                "max_prepared_transactions",
            ]
            .iter()
            .map(|n| get(n).unwrap_or(0))
            .sum();
            Some(l * (c + 1 + others))
        }
        _ => None,
    };
    Ok((version, numeric, shown, capacity))
}

/// Runs the check; see the module docs.
pub(crate) async fn verify(connector: &Connector, settings: &Settings) -> Result<VerifyReport> {
    checks(connector, settings).await.map_err(pooler_named)
}

/// A pooler in transaction or statement mode can also show itself by its
/// symptoms, before the checks that compare backend pids get to run: a
/// prepared statement gone (26000) or another client's of the same name
/// there (42P05, once the pool's server sessions have served others).
fn pooler_named(e: Error) -> Error {
    use crate::ports::sql_state::SqlState;
    let code = e.as_backend().and_then(|b| b.code());
    if code.is_some_and(|c| {
        *c == SqlState::INVALID_SQL_STATEMENT_NAME || *c == SqlState::DUPLICATE_PREPARED_STATEMENT
    }) {
        return failed(VerifyProblem::PreparedStatementLost);
    }
    e
}

/// The checks that take the test key `lock_id`: what the two sessions see
/// of each other, then every advisory function a manager calls.
async fn lock_checks(a: &Client, b: &Client, lock_id: i64) -> Result<Observations> {
    let seen = probe::observe(a, b, lock_id).await?;
    judge(&seen).map_err(failed)?;
    if let Err(problem) = probe::exercise(a, b, lock_id).await? {
        // A function that seems to misbehave is often a pooler that moved
        // the session to another backend mid-way (the first look can see
        // the same backend twice by chance): say so when it did.
        let now = probe::backend_pid(a).await?;
        return Err(failed(if now != seen.a_pid_first {
            VerifyProblem::SessionNotKept {
                first: seen.a_pid_first,
                second: now,
            }
        } else {
            problem
        }));
    }
    Ok(seen)
}

async fn checks(connector: &Connector, settings: &Settings) -> Result<VerifyReport> {
    let a = connector.connect().await.map_err(Error::Backend)?;
    probe::first_statement(&a.client, 1).await?;
    let b = connector.connect().await.map_err(Error::Backend)?;
    probe::first_statement(&b.client, 2).await?;
    if probe::in_recovery(&a.client).await? || probe::in_recovery(&b.client).await? {
        return Err(failed(VerifyProblem::Standby));
    }
    let (first, second) = (
        replication::server_identity(&a.client).await?,
        replication::server_identity(&b.client).await?,
    );
    if first != second {
        return Err(failed(VerifyProblem::SeveralServers { first, second }));
    }
    let lock_id = crate::lock_id_for_key(&format!("eventsource:verify:{}", uuid::Uuid::new_v4()));
    let checked = async {
        let seen = lock_checks(&a.client, &b.client, lock_id).await?;
        let look_alikes = probe::look_alikes(&a.client).await?;
        let fence_tables = probe::fence_tables(&a.client).await?;
        let facts = server_facts(&a.client).await?;
        let replication = replication::replication(&a.client).await?;
        Ok::<_, Error>((seen, (look_alikes, fence_tables), facts, replication))
    }
    .await;
    if checked.is_err() {
        // Any failure after the key was first taken (a pooler may have run
        // the unlocks elsewhere) gives it back wherever it is still held.
        probe::release_everywhere(&a.client, &b.client, lock_id).await;
    }
    let (
        seen,
        (look_alikes, fence_tables),
        (server_version, numeric, shown, capacity),
        replication,
    ) = checked?;
    let mut warnings = advice(
        &numeric,
        settings.liveness_interval,
        settings.max_held_locks,
        capacity,
    );
    if !look_alikes.is_empty() {
        warnings.push(format!(
            "functions named like the advisory-lock functions exist outside pg_catalog ({}): \
             eventsource calls pg_catalog's explicitly, but a client that calls them \
             unqualified, with that schema earlier in its search_path, gets the look-alike and \
             perhaps no lock at all",
            look_alikes.join(", ")
        ));
    }
    if let Some(w) = in_between(connector, &a.client).await? {
        warnings.push(w);
    }
    if !fence_tables.is_empty() {
        warnings.push(format!(
            "{} fence tables in this database ({}): a fenced lock counts its tokens in the \
             first one its session's search_path finds, so sessions with different \
             search_paths hand out tokens of one key from different counters, and a token can \
             repeat; keep one (`eventsource lock install` makes it in the current schema)",
            fence_tables.len(),
            fence_tables.join(", ")
        ));
    }
    Ok(VerifyReport {
        server_version,
        session_pids: (seen.a_pid_first, seen.b_pid),
        server: first,
        lock_table_capacity: capacity,
        settings: shown,
        replication,
        warnings,
    })
}

/// A warning when the server listens on a port no host of the settings
/// names: a pooler or proxy (PgBouncer in session mode, which passes every
/// check) is in between, and the TCP timeouts reported are the server's
/// toward it, not toward the clients.
async fn in_between(connector: &Connector, client: &Client) -> Result<Option<String>> {
    let ports = connector.tcp_ports();
    let listens: Option<i32> = client
        .query_one("SELECT pg_catalog.inet_server_port()", &[])
        .await
        .map_err(query_failed)?
        .get(0);
    let Some(listens) = listens.and_then(|p| u16::try_from(p).ok()) else {
        return Ok(None);
    };
    if ports.is_empty() || ports.contains(&listens) {
        return Ok(None);
    }
    let named: Vec<String> = ports.iter().map(u16::to_string).collect();
    Ok(Some(format!(
        "the server listens on port {listens}, but the connection went to port {}: a pooler \
         or proxy is in between; the TCP settings above are the server's toward it, and how \
         long a client cut off from it keeps its session, and its locks, is the pooler's to \
         decide (PgBouncer: its tcp_keepalive settings, about 2 hours by default; see \
         docs/reliability.md)",
        named.join(" or ")
    )))
}

/// The error `verify` returns for a failed check.
fn failed(problem: VerifyProblem) -> Error {
    // Returned to the caller, who reports it (`lock doctor` prints it once).
    tracing::debug!(%problem, "the server cannot give safe session locks");
    Error::Backend(
        BackendError::new(BackendErrorKind::NotPostgres, problem.to_string()).with_source(problem),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::error::{BackendError, BackendErrorKind};
    use crate::ports::sql_state::SqlState;

    fn with_code(code: SqlState) -> Error {
        BackendError::new(BackendErrorKind::Query, "prepared statement")
            .with_code(code)
            .into()
    }

    #[test]
    fn lost_or_foreign_prepared_statements_name_the_pooler() {
        for code in [
            SqlState::INVALID_SQL_STATEMENT_NAME,
            SqlState::DUPLICATE_PREPARED_STATEMENT,
        ] {
            let e = pooler_named(with_code(code));
            let backend = e.as_backend().expect("a backend error");
            assert_eq!(backend.kind(), BackendErrorKind::NotPostgres, "{e:?}");
            assert!(e.to_string().contains("statement mode"), "{e}");
        }
        let other = pooler_named(with_code(SqlState::INSUFFICIENT_PRIVILEGE));
        assert_eq!(other.as_backend().unwrap().kind(), BackendErrorKind::Query);
    }
}
