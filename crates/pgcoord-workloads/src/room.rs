//! The server's lock-table room: how many locks the whole fleet may hold.

use serde::Serialize;

/// The settings that size PostgreSQL's shared lock table, and its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockTableRoom {
    /// `max_locks_per_transaction`.
    pub max_locks_per_transaction: i64,
    /// `max_connections`.
    pub max_connections: i64,
    /// `max_prepared_transactions`.
    pub max_prepared_transactions: i64,
    /// `max_locks_per_transaction × (max_connections +
    /// max_prepared_transactions)`: the lock-table slots of the server,
    /// shared by every session's locks (advisory locks, and the table
    /// locks of running queries). Held advisory locks beyond it fail with
    /// "out of shared memory" (SQLSTATE 53200), whichever session asks.
    pub slots: i64,
}

/// Reads the three settings (any role may).
pub async fn lock_table_room(client: &tokio_postgres::Client) -> pgcoord::Result<LockTableRoom> {
    let row = client
        .query_one(
            "SELECT pg_catalog.current_setting('max_locks_per_transaction')::int8, \
                    pg_catalog.current_setting('max_connections')::int8, \
                    pg_catalog.current_setting('max_prepared_transactions')::int8",
            &[],
        )
        .await
        .map_err(|e| {
            pgcoord::Error::InvalidArgument(format!("reading the lock-table settings: {e}"))
        })?;
    let (per, conns, prepared): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    Ok(LockTableRoom {
        max_locks_per_transaction: per,
        max_connections: conns,
        max_prepared_transactions: prepared,
        slots: per * (conns + prepared),
    })
}
