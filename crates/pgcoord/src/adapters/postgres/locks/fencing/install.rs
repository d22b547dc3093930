//! The install step of fencing: the table and the SQL functions, in the
//! connection's current schema; and, for a role that may not change them
//! (installed by another), whether they are up to date all the same.

use tokio_postgres::Client;
use tokio_postgres::Transaction;

use super::{EPOCH_SHIFT, FENCED_SQLSTATE};
use crate::adapters::postgres::connection::connect::pg_error;
use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};
use crate::ports::sql_state::SqlState;

/// Serializes concurrent installs (an arbitrary constant advisory id).
const INSTALL_LOCK: i64 = 0x6576_656e_7466_656e; // "eventfen"

const CURRENT_SCHEMA: &str = "SELECT pg_catalog.quote_ident(pg_catalog.current_schema())";
/// Fence tables of this database outside the current schema.
const OTHER_FENCE_TABLES: &str = "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_class c \
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'eventsource_lock_fences' \
    AND c.relkind IN ('r', 'p') AND n.nspname IS DISTINCT FROM pg_catalog.current_schema() ORDER BY 1";

/// The install script for schema `s` (already quoted).
fn install_sql(s: &str) -> String {
    format!(
        r#"
CREATE TABLE IF NOT EXISTS {s}.eventsource_lock_fences (
    lock_id bigint PRIMARY KEY,
    key text NOT NULL,
    fence bigint NOT NULL CHECK (fence >= 0),
    last_run_started timestamptz
);
COMMENT ON TABLE {s}.eventsource_lock_fences IS
    'eventsource: the last fencing token handed out per advisory lock id';
DO $migrate$
DECLARE
    rel oid := (SELECT c.oid FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = pg_catalog.current_schema() AND c.relname = 'eventsource_lock_fences');
BEGIN
    -- Tables created by versions without the run log: add it, and allow
    -- fence 0 (a row made by a run-start record, no token handed out yet).
    -- Checked first, so that a current table takes no ALTER TABLE lock.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = rel
            AND a.attname = 'last_run_started' AND NOT a.attisdropped) THEN
        ALTER TABLE {s}.eventsource_lock_fences ADD COLUMN last_run_started timestamptz;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conrelid = rel
            AND k.conname = 'eventsource_lock_fences_fence_check'
            AND pg_catalog.pg_get_constraintdef(k.oid) = 'CHECK ((fence > 0))') THEN
        ALTER TABLE {s}.eventsource_lock_fences
            DROP CONSTRAINT eventsource_lock_fences_fence_check,
            ADD CONSTRAINT eventsource_lock_fences_fence_check CHECK (fence >= 0);
    END IF;
END
$migrate$;
COMMENT ON COLUMN {s}.eventsource_lock_fences.last_run_started IS
    'eventsource: when the last run of this key started (lock run --min-interval), by the server clock';
-- The epoch of a token: this primary's WAL timeline, which every promotion
-- and point-in-time restore raises. SECURITY DEFINER: the roles that lock
-- need no right to the WAL functions, only the role that installs.
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_epoch() RETURNS bigint
    LANGUAGE sql STABLE STRICT SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT ('x' || pg_catalog.substr(
        pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_id(p_key text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('x' || pg_catalog.substr(pg_catalog.encode(
        pg_catalog.sha256(pg_catalog.convert_to(p_key, 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint
        & 9223372036854775807
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_fence_check(p_lock_id bigint, p_token bigint)
    RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    current_fence bigint;
BEGIN
    SELECT f.fence INTO current_fence FROM {s}.eventsource_lock_fences f
        WHERE f.lock_id = p_lock_id FOR SHARE;
    IF current_fence IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'fencing token % of lock id % is not the current token %',
            p_token, p_lock_id, coalesce(current_fence::text, '(none)')
            USING ERRCODE = '{FENCED_SQLSTATE}',
                  DETAIL = 'current=' || coalesce(current_fence::text, '');
    END IF;
    IF (p_token >> {EPOCH_SHIFT}) <> {s}.eventsource_lock_epoch() THEN
        RAISE EXCEPTION 'fencing token % of lock id % was handed out before a failover',
            p_token, p_lock_id
            USING ERRCODE = '{FENCED_SQLSTATE}',
                  DETAIL = 'current=',
                  HINT = 'the server''s timeline changed since: a later holder may exist';
    END IF;
    RETURN current_fence;
END
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_claim_run(
    p_lock_ids bigint[], p_keys text[], p_interval_us bigint,
    OUT started boolean, OUT at timestamptz, OUT last_started timestamptz)
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {s}.eventsource_lock_fences AS f (lock_id, key, fence)
        SELECT i.id, i.k, 0 FROM unnest(p_lock_ids, p_keys) AS i(id, k)
        ORDER BY i.id
        ON CONFLICT (lock_id) DO NOTHING;
    PERFORM 1 FROM {s}.eventsource_lock_fences f
        WHERE f.lock_id = ANY (p_lock_ids) ORDER BY f.lock_id FOR NO KEY UPDATE;
    SELECT pg_catalog.max(f.last_run_started) INTO last_started
        FROM {s}.eventsource_lock_fences f WHERE f.lock_id = ANY (p_lock_ids);
    -- The server's clock now, after the row locks: never now(), the start
    -- of the transaction.
    at := pg_catalog.clock_timestamp();
    IF last_started IS NOT NULL
            AND last_started > at - p_interval_us * interval '1 microsecond' THEN
        started := false;
        RETURN;
    END IF;
    -- The record must survive a server crash even where commits are
    -- asynchronous: this transaction's commit waits for its WAL flush.
    PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
    UPDATE {s}.eventsource_lock_fences f SET last_run_started = at
        WHERE f.lock_id = ANY (p_lock_ids);
    started := true;
END
$$;
CREATE OR REPLACE FUNCTION {s}.eventsource_lock_fence_check_key(p_key text, p_token bigint)
    RETURNS bigint LANGUAGE sql AS $$
    SELECT {s}.eventsource_lock_fence_check({s}.eventsource_lock_id(p_key), p_token)
$$;
"#
    )
}

/// What [`install`] found: where the fencing objects are, who owns
/// them, and whether this call left them as they were because the role
/// may not change them (they were up to date).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Installed {
    /// The schema that holds them (quoted as an identifier where needed).
    pub schema: String,
    /// The role that owns the fence table.
    pub owner: String,
    /// `true` when they were up to date and the role may not change them
    /// (another role installed them): nothing was run.
    pub left_as_is: bool,
}

/// Creates the fencing table and the SQL check functions in the
/// connection's current schema, if they are not there yet. Idempotent and
/// safe to run concurrently; needs the right to create in that schema and
/// to own what is there, except where all of it is up to date already.
/// Returns where the objects are and who owns them: a role that may not
/// create in the schema or is not the objects' owner gets `Ok` with
/// [`left_as_is`](Installed::left_as_is) when they are up to date (nothing
/// was run), and an error naming the owner when they are not (SQLSTATE
/// 42501).
///
/// The SQL functions, for writers that are not Rust:
/// `eventsource_lock_id(key text) -> bigint` (the crate's key derivation),
/// `eventsource_lock_fence_check(lock_id bigint, token bigint)` and
/// `eventsource_lock_fence_check_key(key text, token bigint)`, which take
/// the same `FOR SHARE` lock as [`check`](super::check) and raise SQLSTATE `ESF01`
/// for a stale token; and `eventsource_lock_claim_run(lock_ids, keys,
/// interval_us)`, the run log of [`PostgresRunLog`](crate::adapters::postgres::PostgresRunLog)
/// (the table's `last_run_started` column). On a table made by an older
/// version it adds that column and lets `fence` be 0 (a row made by a run
/// record, no token handed out yet).
///
/// # Cancel safety
///
/// Cancel safe: it runs in one transaction, which a dropped call leaves
/// uncommitted (the server rolls it back when the connection goes or the
/// next statement runs), so calling again starts from what was there.
pub async fn install(client: &mut Client) -> Result<Installed> {
    let query = |e| Error::Backend(pg_error(e, BackendErrorKind::Query));
    let mut tx = client.transaction().await.map_err(query)?;
    tx.execute(
        "SELECT pg_catalog.pg_advisory_xact_lock($1)",
        &[&INSTALL_LOCK],
    )
    .await
    .map_err(query)?;
    let schema: Option<String> = tx
        .query_one(CURRENT_SCHEMA, &[])
        .await
        .map_err(query)?
        .get(0);
    let Some(schema) = schema else {
        let message = "no schema of this role's search_path exists, so the fencing table has \
                       nowhere to go: create one, or set a search_path whose first schema \
                       exists and this role may create in";
        return Err(BackendError::new(BackendErrorKind::Query, message)
            .with_code(SqlState::INVALID_SCHEMA_NAME)
            .into());
    };
    // One table per database: fenced managers find theirs through their
    // search_path, and two tables would hand out the same tokens twice.
    let elsewhere: Vec<String> = tx
        .query(OTHER_FENCE_TABLES, &[])
        .await
        .map_err(query)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !elsewhere.is_empty() {
        let message = format!(
            "a fence table exists already in schema {} and this connection's current schema is \
             {schema}: a second table would hand out the same tokens and run-log slots again; \
             put that schema first in the search_path (or drop the other table)",
            elsewhere.join(", ")
        );
        return Err(BackendError::new(BackendErrorKind::Query, message)
            .with_code(SqlState::DUPLICATE_TABLE)
            .into());
    }
    // Under a savepoint: a role that may not run it (another role's
    // objects, a read-only session) can still be told whether they are up
    // to date.
    let attempt = tx.savepoint("eventsource_install").await.map_err(query)?;
    let refused = match attempt.batch_execute(&install_sql(&schema)).await {
        Ok(()) => {
            attempt.commit().await.map_err(query)?;
            None
        }
        Err(e) if refusal(&e).is_some() => {
            attempt.rollback().await.map_err(query)?;
            Some(e)
        }
        Err(e) => return Err(query(e)),
    };
    let found = found(&tx, &schema).await.map_err(query)?;
    let Some(refused) = refused else {
        let Some((owner, _)) = found else {
            let message = format!("the fence table is not in schema {schema} after the install");
            return Err(BackendError::new(BackendErrorKind::Query, message).into());
        };
        tx.commit().await.map_err(query)?;
        return Ok(Installed {
            schema,
            owner,
            left_as_is: false,
        });
    };
    match (found, refusal(&refused)) {
        (Some((owner, true)), _) => Ok(Installed {
            schema,
            owner,
            left_as_is: true,
        }),
        (Some((owner, false)), Some(Refusal::Privilege)) => {
            let said = pg_error(refused, BackendErrorKind::Query)
                .message()
                .to_owned();
            let message = format!(
                "the fencing objects in schema {schema} are from an older version and owned by \
                 role {owner}, and this role may not upgrade them ({said}): run `eventsource \
                 lock install` (or install_fencing()) as {owner}, or a member of it"
            );
            Err(BackendError::new(BackendErrorKind::Query, message)
                .with_code(SqlState::INSUFFICIENT_PRIVILEGE)
                .into())
        }
        _ => Err(query(refused)),
    }
}

/// Why the server refused the install script, when it is the role or the
/// session that may not (rather than the script that failed).
enum Refusal {
    /// SQLSTATE 42501: not the owner, no CREATE on the schema.
    Privilege,
    /// SQLSTATE 25006: a read-only transaction.
    ReadOnly,
}

fn refusal(e: &tokio_postgres::Error) -> Option<Refusal> {
    use tokio_postgres::error::SqlState as Code;
    match e.code()? {
        c if *c == Code::INSUFFICIENT_PRIVILEGE => Some(Refusal::Privilege),
        c if *c == Code::READ_ONLY_SQL_TRANSACTION => Some(Refusal::ReadOnly),
        _ => None,
    }
}

/// The fence table of the current schema, if any: its owner, and whether
/// it and every function are those [`install_sql`] makes.
async fn found(
    tx: &Transaction<'_>,
    schema: &str,
) -> std::result::Result<Option<(String, bool)>, tokio_postgres::Error> {
    let Some(row) = tx.query_opt(TABLE_STATE, &[]).await? else {
        return Ok(None);
    };
    let (owner, table_current): (String, bool) = (row.get(0), row.get(1));
    let have: Vec<(String, String)> = tx
        .query(FUNCTIONS, &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let functions_current = function_sources(&install_sql(schema))
        .iter()
        .all(|want| have.contains(want));
    Ok(Some((owner, table_current && functions_current)))
}

/// The fence table of the current schema: its owner, and whether it has
/// what [`install_sql`]'s migration adds (the run log's column, the
/// relaxed check).
const TABLE_STATE: &str = "SELECT pg_catalog.pg_get_userbyid(c.relowner)::text, \
    EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid \
        AND a.attname = 'last_run_started' AND NOT a.attisdropped) \
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conrelid = c.oid \
        AND k.conname = 'eventsource_lock_fences_fence_check' \
        AND pg_catalog.pg_get_constraintdef(k.oid) = 'CHECK ((fence > 0))') \
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
    WHERE n.nspname = pg_catalog.current_schema() AND c.relname = 'eventsource_lock_fences' \
    AND c.relkind IN ('r', 'p')";

/// The fencing functions of the current schema and their bodies.
const FUNCTIONS: &str = "SELECT p.proname::text, p.prosrc FROM pg_catalog.pg_proc p \
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
    WHERE n.nspname = pg_catalog.current_schema() AND p.proname LIKE 'eventsource\\_lock\\_%'";

/// Every function `sql` (an install script) creates: its name and its
/// body as the server keeps it (`prosrc`, the text between the `$$`).
fn function_sources(sql: &str) -> Vec<(String, String)> {
    sql.split("CREATE OR REPLACE FUNCTION ")
        .skip(1)
        .filter_map(|f| {
            let (signature, rest) = f.split_once("AS $$")?;
            let name = signature.split_once('(')?.0.rsplit('.').next()?;
            let body = rest.split_once("$$")?.0;
            Some((name.trim().to_owned(), body.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_of_the_script_is_compared() {
        let found = function_sources(&install_sql("ops"));
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "eventsource_lock_epoch",
                "eventsource_lock_id",
                "eventsource_lock_fence_check",
                "eventsource_lock_claim_run",
                "eventsource_lock_fence_check_key"
            ]
        );
        assert!(found.iter().all(|(_, body)| !body.contains("$$")));
        assert!(found[3].1.contains("ops.eventsource_lock_fences"));
    }
}
