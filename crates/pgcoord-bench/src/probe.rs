//! Connections and server-side views the scenarios need: a monitor session
//! on `pg_locks` / `pg_stat_activity`, and plain tokio-postgres sessions.

use std::time::{Duration, Instant};

use tokio_postgres::{Client, Config, NoTls, Statement};

use crate::Res;

/// Opens a tokio-postgres session labelled `application_name` (its connection task is spawned).
pub async fn connect(config: &Config, application_name: &str) -> Res<Client> {
    let mut config = config.clone();
    config.application_name(application_name);
    let (client, conn) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// A session that watches the server: waiters in `pg_locks`, sessions in `pg_stat_activity`.
pub struct Monitor {
    client: Client,
    waiting: Statement,
    sessions_like: Statement,
    statements: Option<Statement>,
    /// Why `statements` is None: the server's own words.
    statements_unavailable: Option<String>,
    pids_like: Statement,
}

/// The `pg_stat_statements` query, prepared and run once, where the server
/// can answer it. The extension can often be created where the library is
/// not preloaded; querying it then fails ("pg_stat_statements must be
/// loaded via shared_preload_libraries", SQLSTATE 55000), so the query is
/// tried here, not assumed to work. Err: why not, in the server's words.
async fn statements_query(client: &Client) -> Result<Statement, String> {
    let why = |e: tokio_postgres::Error| crate::errors::describe(&e);
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .map_err(why)?;
    let stmt = client
        .prepare(
            "SELECT coalesce(sum(calls), 0)::int8, coalesce(sum(rows), 0)::int8 \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
               AND query LIKE '%advisory%' AND query NOT LIKE '%pg_locks%' \
               AND query NOT LIKE '%pg_stat_statements%'",
        )
        .await
        .map_err(why)?;
    client.query_one(&stmt, &[]).await.map_err(why)?;
    Ok(stmt)
}

impl Monitor {
    pub async fn open(config: &Config) -> Res<Self> {
        let client = connect(config, "bench/monitor").await?;
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
        let (statements, statements_unavailable) = match statements_query(&client).await {
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
        })
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
