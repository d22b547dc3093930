//! Connections and server-side views the scenarios need: a monitor session
//! on `pg_locks` / `pg_stat_activity`, and plain tokio-postgres sessions.

use std::time::{Duration, Instant};

use pgcoord::error::BackendErrorKind;
use pgcoord::inspect::connect_for_inspection;
use pgcoord::ConnectOptions;
use tokio_postgres::{Client, Statement};

use crate::transport::SESSION_LIMIT;
use crate::Res;

/// Opens a tokio-postgres session labelled `application_name`, with the
/// run's transport (the library's own TLS connector: the same TLS as the
/// library's sessions; its connection task is spawned). Connecting and
/// the first statement's answer are each bounded by [`SESSION_LIMIT`]: a
/// pooler with no server connection free for the session accepts it and
/// then keeps its statements waiting, so that is said here rather than
/// left to a scenario's own timeout much later.
pub async fn connect(options: &ConnectOptions, application_name: &str) -> Res<Client> {
    let options = options.clone().with_application_name(application_name);
    let client = match connect_for_inspection(options, SESSION_LIMIT).await {
        Ok(client) => client,
        // Accepted, and its first statement (the session's set-up) not
        // answered: what a pooler with no server connection free does.
        Err(e) if e.as_backend().map(|b| b.kind()) == Some(BackendErrorKind::NoAnswer) => {
            return Err(not_served(application_name).into())
        }
        Err(e) => return Err(e.into()),
    };
    match tokio::time::timeout(SESSION_LIMIT, client.simple_query("SELECT 1")).await {
        Ok(answer) => {
            answer?;
            Ok(client)
        }
        Err(_) => Err(not_served(application_name).into()),
    }
}

/// Why a session that connected got no answer.
pub fn not_served(application_name: &str) -> String {
    format!(
        "session {application_name} was accepted but its first statement got no answer within \
         {} s: a pooler seems to be queueing connections (no server connection free for this \
         database and user), or the server is overloaded; see docs/performance.md (\"Server \
         sessions\") for how many server sessions each scenario needs at once",
        SESSION_LIMIT.as_secs()
    )
}

/// A session that watches the server: waiters in `pg_locks`, sessions in `pg_stat_activity`.
pub struct Monitor {
    client: Client,
    waiting: Statement,
    sessions_like: Statement,
    statements: Option<Statement>,
    /// Why `statements` is None: the server's own words.
    statements_unavailable: Option<String>,
    /// Whether this run created the `pg_stat_statements` extension (it is
    /// dropped again by [`Monitor::clean_up`]).
    created_extension: bool,
    pids_like: Statement,
}

/// The `pg_stat_statements` query, prepared and run once, where the server
/// can answer it. Where the extension is not in the database it is created
/// (a superuser may), and `created` set: the run drops it again at its
/// end. The extension can often be created where the library is not
/// preloaded; querying it then fails ("pg_stat_statements must be loaded
/// via shared_preload_libraries", SQLSTATE 55000), so the query is tried
/// here, not assumed to work, and an extension created for nothing is
/// dropped at once. Err: why not, in the server's words.
async fn statements_query(client: &Client, created: &mut bool) -> Result<Statement, String> {
    let why = |e: tokio_postgres::Error| crate::errors::describe(&e);
    let present: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements')",
            &[],
        )
        .await
        .map_err(why)?
        .get(0);
    if !present {
        client
            .batch_execute("CREATE EXTENSION pg_stat_statements")
            .await
            .map_err(|e| format!("cannot create the extension pg_stat_statements: {}", why(e)))?;
        *created = true;
    }
    let query = async {
        let stmt = client
            .prepare(
                "SELECT coalesce(sum(calls), 0)::int8, coalesce(sum(rows), 0)::int8 \
                 FROM pg_stat_statements \
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                   AND query LIKE '%advisory%' AND query NOT LIKE '%pg_locks%' \
                   AND query NOT LIKE '%pg_stat_statements%'",
            )
            .await?;
        client.query_one(&stmt, &[]).await?;
        Ok::<_, tokio_postgres::Error>(stmt)
    };
    match query.await {
        Ok(stmt) => Ok(stmt),
        Err(e) => {
            // Created but unusable (not preloaded): take it away again.
            if *created
                && client
                    .batch_execute("DROP EXTENSION pg_stat_statements")
                    .await
                    .is_ok()
            {
                *created = false;
            }
            Err(why(e))
        }
    }
}

impl Monitor {
    pub async fn open(options: &ConnectOptions) -> Res<Self> {
        let client = connect(options, "bench/monitor").await?;
        let waiting = client
            .prepare(
                "SELECT count(*) FROM pg_locks \
                 WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1 \
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                   AND ((classid::int8 << 32) | objid::int8) = $1",
            )
            .await?;
        let sessions_like = client
            .prepare(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name LIKE $1 AND datname = current_database()",
            )
            .await?;
        let mut created_extension = false;
        let statements = statements_query(&client, &mut created_extension).await;
        let (statements, statements_unavailable) = match statements {
            Ok(stmt) => (Some(stmt), None),
            Err(why) => (None, Some(why)),
        };
        let pids_like = client
            .prepare(
                "SELECT pid FROM pg_stat_activity \
                 WHERE application_name LIKE $1 AND datname = current_database()",
            )
            .await?;
        Ok(Self {
            pids_like,
            client,
            waiting,
            sessions_like,
            statements,
            statements_unavailable,
            created_extension,
        })
    }

    /// The monitor's session, for one-off reads.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Drops what the monitor created: the `pg_stat_statements` extension,
    /// if this run created it. Err: why it is still there.
    pub async fn clean_up(&self) -> Res<()> {
        if self.created_extension {
            self.client
                .batch_execute("DROP EXTENSION IF EXISTS pg_stat_statements")
                .await?;
        }
        Ok(())
    }

    /// How many sessions wait (`granted = false`) on advisory lock `id`.
    pub async fn waiting_on(&self, id: i64) -> Res<i64> {
        Ok(self.client.query_one(&self.waiting, &[&id]).await?.get(0))
    }

    /// Waits until at least `n` sessions wait on `id`; false if `limit` passed first.
    pub async fn wait_for_waiters(&self, id: i64, n: i64, limit: Duration) -> Res<bool> {
        let deadline = Instant::now() + limit;
        loop {
            if self.waiting_on(id).await? >= n {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::task::yield_now().await;
        }
    }

    /// Sessions of this database whose `application_name` matches the LIKE `pattern`.
    pub async fn sessions_like(&self, pattern: &str) -> Res<u32> {
        let n: i64 = self
            .client
            .query_one(&self.sessions_like, &[&pattern])
            .await?
            .get(0);
        Ok(n as u32)
    }

    /// (statements, rows) run so far in this database by advisory-lock
    /// statements of anyone but this monitor, from pg_stat_statements
    /// (exact, updated as each statement ends); None where it is not loaded.
    pub async fn lock_statements(&self) -> Res<Option<(i64, i64)>> {
        let Some(stmt) = &self.statements else {
            return Ok(None);
        };
        let row = self.client.query_one(stmt, &[]).await?;
        Ok(Some((row.get(0), row.get(1))))
    }

    /// Why statement counts are not available on this server (None: they are).
    pub fn statements_unavailable(&self) -> Option<&str> {
        self.statements_unavailable.as_deref()
    }

    /// Server process ids of the sessions matching the LIKE `pattern`.
    pub async fn pids_like(&self, pattern: &str) -> Res<Vec<i32>> {
        let rows = self.client.query(&self.pids_like, &[&pattern]).await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// A one-value text query (e.g. `SHOW server_version`).
    pub async fn show(&self, what: &str) -> Res<String> {
        let rows = self.client.simple_query(&format!("SHOW {what}")).await?;
        for m in rows {
            if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
                return Ok(r.get(0).unwrap_or_default().to_owned());
            }
        }
        Ok(String::new())
    }
}
