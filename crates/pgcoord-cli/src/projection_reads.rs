//! The reads of `projection status` and `projection dlq`: one look at a
//! projection's status (and its rebuild's), and the note that says a
//! table was not there (bounded by [`answered`]).
//!
//! The library reads a missing projection table as "nothing yet" (no
//! checkpoint, no parked event), which is right for a projection that
//! never ran. An operator pointed at the wrong database, or logged in as a
//! role that cannot see the tables, would read the same: the note says
//! which database and role were read.

use pgcoord::readmodels::postgres::{projection_status, ProjectionStatus};
use pgcoord::readmodels::version_name;
use tokio_postgres::Client;

use crate::projection_args::ProjectionStatusArgs;

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

/// A note for a NAME without a checkpoint where other projections have
/// one: a misspelt name and a projection that never ran look alike
/// otherwise. Called once the table is known to be there; `None` when it
/// holds no name.
pub async fn other_names_note(
    client: &Client,
    table: &str,
    name: &str,
) -> pgcoord::Result<Option<String>> {
    const SHOWN: i64 = 10;
    let rows = answered(async {
        let sql = format!(r#"SELECT "projection" FROM "{table}" ORDER BY 1 LIMIT $1"#);
        client
            .query(sql.as_str(), &[&(SHOWN + 1)])
            .await
            .map_err(pgcoord::Error::from)
    })
    .await?;
    let mut names: Vec<String> = rows
        .iter()
        .map(|r| format!("{:?}", r.get::<_, &str>(0)))
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    if names.len() as i64 > SHOWN {
        names.truncate(SHOWN as usize);
        names.push("...".to_owned());
    }
    Ok(Some(format!(
        "note: projection {name:?} has no checkpoint here (it never ran against this \
         database, or the name is misspelt); projections with one: {}",
        names.join(", ")
    )))
}

/// The projection's status and, while a rebuild builds a version, that
/// version's (its checkpoint, lag, rate and runner, under
/// `NAME@vN`).
pub async fn look(
    client: &tokio_postgres::Client,
    args: &ProjectionStatusArgs,
) -> pgcoord::Result<(ProjectionStatus, Option<ProjectionStatus>)> {
    let table = args.events_table.as_deref();
    let status = projection_status(client, &args.name, table).await?;
    let rebuild = match &status.rebuild {
        Some(r) => {
            let name = version_name(&args.name, r.version);
            Some(projection_status(client, &name, table).await?)
        }
        None => None,
    };
    Ok((status, rebuild))
}
