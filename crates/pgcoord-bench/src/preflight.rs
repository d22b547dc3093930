//! Before the scenarios: can the bench have the server sessions it needs?
//!
//! Behind a pooler whose pool is smaller than a scenario's sessions, the
//! pooler accepts every connection and keeps the extra ones waiting for a
//! server connection: the scenario then fails much later, with words that
//! do not mention the pool (an acquisition that never returned, a waiter
//! that never queued, PgBouncer's `query_wait_timeout` after 120 s). So the
//! run first opens as many sessions at once as its scenarios need, each
//! bounded like [`probe::connect`](crate::probe::connect), and stops early
//! with the reason when they are not all served.

use pgcoord::ConnectOptions;

use crate::probe::connect;
use crate::transport::SESSION_LIMIT;

/// Server sessions `name` holds at once at most, the bench's monitor
/// session included: the peaks `pg_stat_activity` showed (sampled every
/// ~0.15 s) during a `--quick` run against a private PostgreSQL 15, with
/// some room (see docs/performance.md, "Server sessions").
pub fn sessions_needed(name: &str) -> usize {
    let own = match name {
        // 4 processes x a pool of 16 connections.
        "contention_sqlx" => 64,
        "semaphore_fifo_managers" => 40,
        "segments" => 28,
        "contention" => 24,
        "fifo" | "fifo_one_manager" => 20,
        "semaphore_fifo" => 16,
        "sweep" => 10,
        n if n.starts_with("sqlx_pool") => 8,
        "lock_bench" | "holders10k" | "semaphore_fifo_one_manager" => 8,
        "abandoned" | "abandoned_alone" | "handoff" | "held10k" => 6,
        "election_resign" | "election_failover" | "capacity" => 6,
        _ => 4,
    };
    own + 1
}

/// Opens `n` sessions at once (then closes them). Err: how many were
/// served, and why the rest were not, in words that name the pooler.
pub async fn check(options: &ConnectOptions, n: usize, needs: &str) -> Result<(), String> {
    let mut open = Vec::with_capacity(n);
    for i in 0..n {
        match connect(options, &format!("bench/preflight-{i}")).await {
            Ok(client) => open.push(client),
            Err(e) => {
                return Err(format!(
                    "only {} of the {n} server sessions the selected scenarios need at once \
                     ({needs}) could be opened, each given {} s: {}; raise the pool size (or \
                     the server's max_connections) or run fewer scenarios with --only",
                    open.len(),
                    SESSION_LIMIT.as_secs(),
                    crate::errors::describe(&*e)
                ))
            }
        }
    }
    Ok(())
}

/// Whether the server gives session-level advisory locks through
/// `options`, as the library's [`verify`](pgcoord::PostgresLockManager::verify)
/// checks: behind a transaction- or statement-mode pooler (PgBouncer's
/// `pool_mode = transaction`), one client is served by different server
/// sessions, so the scenarios would fail with words that do not name the
/// pooler (`prepared statement "s0" already exists`) and leave advisory
/// locks held on the pooler's server sessions. Err: why, in words that do.
pub async fn session_locks(options: &ConnectOptions) -> Result<(), String> {
    let checker = pgcoord::PostgresLockManager::builder(options.clone())
        .holder_id("bench-preflight")
        .build()
        .map_err(|e| e.to_string())?;
    let verdict = checker.verify().await;
    let _ = checker.close().await;
    verdict.map(|_| ()).map_err(|e| {
        format!(
            "the connection does not keep session-level advisory locks, which every scenario \
             needs: {}; behind PgBouncer, use pool_mode = session (transaction and statement \
             pooling hand one client's statements to different server sessions), or connect \
             to PostgreSQL directly",
            crate::errors::describe(&e)
        )
    })
}
