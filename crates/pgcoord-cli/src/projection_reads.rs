//! What `projection status` and `projection dlq` share about their reads:
//! the note that says a table was not there (each answer bounded by
//! [`answered`]).
//!
//! The library reads a missing projection table as "nothing yet" (no
//! checkpoint, no parked event), which is right for a projection that
//! never ran. An operator pointed at the wrong database, or logged in as a
//! role that cannot see the tables, would read the same: the note says
//! which database and role were read.

use tokio_postgres::Client;

use crate::db::answered;

/// When `table` is not visible to this session: the line that says so,
/// naming the database and the role. `None` when it is there.
pub async fn missing_table_note(client: &Client, table: &str) -> pgcoord::Result<Option<String>> {
    let row = answered(async {
        client
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL, current_database()::text, current_user::text",
                &[&table],
            )
            .await
            .map_err(pgcoord::Error::from)
    })
    .await?;
    let (present, database, role): (bool, String, String) = (row.get(0), row.get(1), row.get(2));
    Ok((!present).then(|| {
        format!(
            "note: database {database:?} has no table {table} that role {role:?} can see \
             (none created there yet, another database, or no privilege on its schema)"
        )
    }))
}
