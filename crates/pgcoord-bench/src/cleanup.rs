//! What the scenarios create in the user's database, and taking it away
//! again: tables are dropped only if the run created them (a table that
//! was there before, such as the fencing table `lock install` makes, is
//! shared with real users and stays), and a missing CREATE privilege is
//! said once, with what the scenario tried to create.

use std::error::Error as StdError;
use std::future::Future;

use tokio_postgres::Client;

use crate::{leftovers, Res};

/// Which of `tables` do not exist yet (in the search path): the ones the
/// run may drop again afterwards. They are registered as the run's own
/// ([`leftovers::created`]), so an interrupted run drops them too.
pub async fn absent(client: &Client, tables: &[&str]) -> Res<Vec<String>> {
    let mut out = Vec::new();
    for t in tables {
        let missing: bool = client
            .query_one("SELECT to_regclass(quote_ident($1)) IS NULL", &[t])
            .await?
            .get(0);
        if missing {
            leftovers::created(t);
            out.push((*t).to_owned());
        }
    }
    Ok(out)
}

/// Drops `tables` (with their owned sequences) if they exist, and
/// forgets them ([`leftovers::dropped`]).
pub async fn drop_tables(client: &Client, tables: &[String]) -> Res<()> {
    for table in tables {
        let t = table.replace('"', "\"\"");
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{t}\""))
            .await?;
        leftovers::dropped(table);
    }
    Ok(())
}

/// The SQLSTATE of the first server error in `e`'s chain.
fn sqlstate(e: &(dyn StdError + 'static)) -> Option<(String, String)> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(db) = err
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(|pg| pg.as_db_error())
            .or_else(|| err.downcast_ref::<tokio_postgres::error::DbError>())
        {
            return Some((db.code().code().to_owned(), db.message().to_owned()));
        }
        cur = err.source();
    }
    None
}

/// Runs `create`; a refusal for want of privilege (SQLSTATE 42501)
/// becomes one sentence that says what was needed and for what, e.g.
/// "needs CREATE on schema public to create bench_segment_tallies".
pub async fn creating<T, E>(what: &str, create: impl Future<Output = Result<T, E>>) -> Res<T>
where
    E: StdError + Send + Sync + 'static,
{
    create.await.map_err(|e| match sqlstate(&e) {
        Some((code, message)) if code == "42501" => {
            let schema = message
                .strip_prefix("permission denied for schema ")
                .map(str::to_owned);
            match schema {
                Some(s) => format!("needs CREATE on schema {s} to create {what} (SQLSTATE 42501)"),
                None => format!("needs the privilege to create {what}: {message} (SQLSTATE 42501)"),
            }
            .into()
        }
        _ => e.into(),
    })
}

/// What `install_fencing` creates, for messages: shared with real users
/// (`eventsource lock install` makes the same), so never dropped.
pub const FENCE_TABLE: &str =
    "the fencing table eventsource_lock_fences (or run `eventsource lock \
                               install` once as a role that may)";
