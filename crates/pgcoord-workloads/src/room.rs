//! The server's lock-table room: how many locks the whole fleet may hold.

use serde::Serialize;

/// The settings that size PostgreSQL's shared lock table, and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockTableRoom {
    /// `max_locks_per_transaction`.
    pub max_locks_per_transaction: i64,
    /// `max_connections`.
    pub max_connections: i64,
    /// Every backend slot the lock table is sized for: `max_connections`,
    /// `autovacuum_max_workers` + 1 (the launcher), `max_worker_processes`,
    /// `max_wal_senders` and `max_prepared_transactions`, as PostgreSQL
    /// counts them (and `lock doctor` reports).
    pub backend_slots: i64,
    /// `max_locks_per_transaction × backend_slots`: the lock-table slots of
    /// the server, shared by every session's locks (advisory locks, and the
    /// table locks of running queries). Held locks beyond it fail with "out
    /// of shared memory" (SQLSTATE 53200), whichever session asks (a few
    /// more fit while the server's spare shared memory lasts).
    pub slots: i64,
}

/// Reads the settings (any role may).
///
/// # Cancel safety
///
/// Cancel safe: one read.
pub async fn lock_table_room(client: &tokio_postgres::Client) -> pgcoord::Result<LockTableRoom> {
    let setting = |name: &str| format!("pg_catalog.current_setting('{name}')::int8");
    let sql = format!(
        "SELECT {}, {}, {} + {} + 1 + {} + {} + {}",
        setting("max_locks_per_transaction"),
        setting("max_connections"),
        setting("max_connections"),
        setting("autovacuum_max_workers"),
        setting("max_worker_processes"),
        setting("max_wal_senders"),
        setting("max_prepared_transactions"),
    );
    let row = client.query_one(&sql, &[]).await.map_err(|e| {
        pgcoord::Error::InvalidArgument(format!("reading the lock-table settings: {e}"))
    })?;
    let (per, conns, backends): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    Ok(LockTableRoom {
        max_locks_per_transaction: per,
        max_connections: conns,
        backend_slots: backends,
        slots: per * backends,
    })
}
