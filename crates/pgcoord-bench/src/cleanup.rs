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

pub use crate::leftovers::drop_tables;

/// The SQLSTATE of the first server error in `e`'s chain.
fn sqlstate(e: &(dyn StdError + 'static)) -> Option<(String, String)> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        // The library's error carries the server's message and SQLSTATE
        // itself (the driver's error is no cause of it).
        let backend = err
            .downcast_ref::<pgcoord::Error>()
            .and_then(pgcoord::Error::as_backend);
        if let Some((code, b)) = backend.and_then(|b| Some((b.code()?, b))) {
            return Some((code.code().to_owned(), b.message().to_owned()));
        }
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

/// Whether the fencing table and its functions are in place as this
/// version installs them (in the search path of `client`, a session of the
/// run's role): the table with its `last_run_started` column and
/// `fence >= 0` check, and the five SQL functions.
pub async fn fencing_installed(client: &Client) -> Res<bool> {
    let row = client
        .query_one(
            "SELECT to_regclass('eventsource_lock_fences') IS NOT NULL \
               AND EXISTS (SELECT 1 FROM pg_attribute a \
                   WHERE a.attrelid = to_regclass('eventsource_lock_fences') \
                     AND a.attname = 'last_run_started' AND NOT a.attisdropped) \
               AND NOT EXISTS (SELECT 1 FROM pg_constraint k \
                   WHERE k.conrelid = to_regclass('eventsource_lock_fences') \
                     AND k.conname = 'eventsource_lock_fences_fence_check' \
                     AND pg_get_constraintdef(k.oid) = 'CHECK ((fence > 0))') \
               AND to_regprocedure('eventsource_lock_epoch()') IS NOT NULL \
               AND to_regprocedure('eventsource_lock_id(text)') IS NOT NULL \
               AND to_regprocedure('eventsource_lock_fence_check(bigint, bigint)') IS NOT NULL \
               AND to_regprocedure('eventsource_lock_fence_check_key(text, bigint)') IS NOT NULL \
               AND to_regprocedure('eventsource_lock_claim_run(bigint[], text[], bigint)') \
                   IS NOT NULL",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Runs `install` (`install_fencing()` or `fencing::install`) only when
/// the fencing table and its functions are not all there yet
/// ([`fencing_installed`], asked on `client`): installing checks the
/// schema's CREATE privilege even when everything exists, so a role
/// without it could not run the fenced scenarios on a database where
/// another role ran `eventsource lock install`.
pub async fn install_fencing<T, E>(
    client: &Client,
    install: impl Future<Output = Result<T, E>>,
) -> Res<()>
where
    E: StdError + Send + Sync + 'static,
{
    if fencing_installed(client).await? {
        return Ok(());
    }
    creating(FENCE_TABLE, async { install.await.map(drop) }).await
}
