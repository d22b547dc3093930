//! The dead-letter table on PostgreSQL, `eventsource_projection_dead_letters`:
//! one row per parked event of a projection. The statements here need no
//! model, so `eventsource projection dlq` runs them on a plain client; the
//! runner's transactional ones are in `parking.rs`.

use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row};

use super::source::query_error;
use crate::ports::backend_error::{BackendError, BackendErrorKind};
use crate::ports::error::{Error, Result};
use crate::ports::readmodels::{DeadLetter, DeadLetterSelection, Parking};

/// The dead-letter table of the projection runners.
pub const DEAD_LETTER_TABLE: &str = "eventsource_projection_dead_letters";

/// The table and its partition index.
pub(super) const CREATE: &str = r#"CREATE TABLE IF NOT EXISTS "eventsource_projection_dead_letters" ("projection" TEXT NOT NULL, "position" BIGINT NOT NULL, "partition_key" TEXT, "payload" JSONB, "error" TEXT NOT NULL, "attempts" INTEGER NOT NULL, "behind" BIGINT, "first_failure" TIMESTAMPTZ NOT NULL, "last_failure" TIMESTAMPTZ NOT NULL, "replay_requested" BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY ("projection", "position"));
CREATE INDEX IF NOT EXISTS "eventsource_projection_dead_letters_partition" ON "eventsource_projection_dead_letters" ("projection", "partition_key", "position") WHERE "partition_key" IS NOT NULL"#;

/// The advisory lock the table's creation is serialised on (runners
/// starting together would race in `CREATE TABLE IF NOT EXISTS`).
const PREPARE_LOCK: i64 = 0x6576_7473_646c_7130;

const COLUMNS: &str = r#""projection", "position", "partition_key", "payload", "error", "attempts", "first_failure", "last_failure", "behind", "replay_requested""#;

/// Creates the table when it is missing; sends no DDL when it exists.
pub(super) async fn prepare<C: GenericClient + Sync>(c: &C) -> Result<()> {
    let row = c
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&DEAD_LETTER_TABLE])
        .await
        .map_err(query_error)?;
    if row.get::<_, bool>(0) {
        return Ok(());
    }
    c.batch_execute(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock({PREPARE_LOCK}); {CREATE}; COMMIT;"
    ))
    .await
    .map_err(query_error)
}

/// 42P01: the table does not exist (yet).
fn is_undefined_table(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE)
}

/// The `WHERE` clause of `selection` (parameters: the projection, then the
/// positions when there are some).
fn filter(selection: &DeadLetterSelection) -> &'static str {
    match selection {
        DeadLetterSelection::All => r#""projection" = $1"#,
        DeadLetterSelection::Positions(_) => r#""projection" = $1 AND "position" = ANY($2)"#,
        DeadLetterSelection::ReplayRequested => r#""projection" = $1 AND "replay_requested""#,
    }
}

fn params<'a>(
    projection: &'a &'a str,
    selection: &'a DeadLetterSelection,
) -> Vec<&'a (dyn ToSql + Sync)> {
    match selection {
        DeadLetterSelection::Positions(p) => vec![projection, p],
        _ => vec![projection],
    }
}

/// One row as a [`DeadLetter`]; a value the Rust type cannot hold (an
/// `infinity` timestamp written by hand) is an error naming its column.
fn letter(r: &Row) -> Result<DeadLetter> {
    fn get<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> Result<T> {
        r.try_get(i).map_err(|e| {
            let why =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            let message = format!(
                "cannot read column {} of a dead letter: {why}",
                r.columns()[i].name()
            );
            Error::Backend(BackendError::new(BackendErrorKind::Query, message).with_driver_error(e))
        })
    }
    Ok(DeadLetter {
        projection: get(r, 0)?,
        position: get(r, 1)?,
        partition: get(r, 2)?,
        payload: get(r, 3)?,
        error: get(r, 4)?,
        attempts: get(r, 5)?,
        first_failure: get(r, 6)?,
        last_failure: get(r, 7)?,
        behind: get(r, 8)?,
        replay_requested: get(r, 9)?,
    })
}

/// `projection`'s selected dead letters, by position (none before the
/// table exists).
///
/// # Cancel safety
///
/// Cancel safe: a read.
pub async fn list_dead_letters<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    selection: &DeadLetterSelection,
) -> Result<Vec<DeadLetter>> {
    let sql = format!(
        r#"SELECT {COLUMNS} FROM "eventsource_projection_dead_letters" WHERE {} ORDER BY "position""#,
        filter(selection)
    );
    match c.query(&sql, &params(&projection, selection)).await {
        Ok(rows) => rows.iter().map(letter).collect(),
        Err(e) if is_undefined_table(&e) => Ok(Vec::new()),
        Err(e) => Err(query_error(e)),
    }
}

/// How many dead letters `projection` has (0 before the table exists).
///
/// # Cancel safety
///
/// Cancel safe: a read.
pub async fn count_dead_letters<C: GenericClient + Sync>(c: &C, projection: &str) -> Result<u64> {
    let sql =
        r#"SELECT count(*) FROM "eventsource_projection_dead_letters" WHERE "projection" = $1"#;
    match c.query_one(sql, &[&projection]).await {
        Ok(row) => Ok(row.get::<_, i64>(0) as u64),
        Err(e) if is_undefined_table(&e) => Ok(0),
        Err(e) => Err(query_error(e)),
    }
}

/// Removes the selected dead letters; returns how many went.
///
/// # Cancel safety
///
/// One statement: dropped, they went or not.
pub async fn drop_dead_letters<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    selection: &DeadLetterSelection,
) -> Result<u64> {
    let sql = format!(
        r#"DELETE FROM "eventsource_projection_dead_letters" WHERE {}"#,
        filter(selection)
    );
    match c.execute(&sql, &params(&projection, selection)).await {
        Ok(n) => Ok(n),
        Err(e) if is_undefined_table(&e) => Ok(0),
        Err(e) => Err(query_error(e)),
    }
}

/// Marks the selected dead letters for replay by the projection's runner,
/// which applies them through its handler on its next batch; returns how
/// many were marked.
///
/// # Cancel safety
///
/// One statement: dropped, they were marked or not.
pub async fn request_replay<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    selection: &DeadLetterSelection,
) -> Result<u64> {
    let sql = format!(
        r#"UPDATE "eventsource_projection_dead_letters" SET "replay_requested" = true WHERE {}"#,
        filter(selection)
    );
    match c.execute(&sql, &params(&projection, selection)).await {
        Ok(n) => Ok(n),
        Err(e) if is_undefined_table(&e) => Ok(0),
        Err(e) => Err(query_error(e)),
    }
}

/// One more failed attempt at the dead letter at `position`, and no replay
/// request left on it or on the other dead letters of its partition (they
/// wait behind it: a request is answered by this one attempt, not tried
/// again before every batch). One statement.
pub(super) async fn record_failure<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    position: i64,
    error: &str,
) -> Result<()> {
    c.execute(
        r#"WITH "failed" AS (UPDATE "eventsource_projection_dead_letters" SET "attempts" = "attempts" + 1, "error" = $3, "last_failure" = now(), "behind" = NULL, "replay_requested" = false WHERE "projection" = $1 AND "position" = $2 RETURNING "partition_key") UPDATE "eventsource_projection_dead_letters" SET "replay_requested" = false WHERE "projection" = $1 AND "position" <> $2 AND "replay_requested" AND "partition_key" IN (SELECT "partition_key" FROM "failed")"#,
        &[&projection, &position, &error],
    )
    .await
    .map_err(query_error)?;
    Ok(())
}

/// Writes a parked event (`behind`: the parked event of its partition it is
/// held behind). Both failure times are on the server's clock, as every
/// later `last_failure` is: the first is the server's `now()` less the time
/// since `parking.first_failure` (measured on this process's clock, so a
/// skew between the two clocks cancels out), never after the last. An
/// event held behind another has no failure of its own: both are `now()`.
pub(super) async fn insert<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    parking: &Parking,
    behind: Option<i64>,
) -> Result<()> {
    let attempts = i32::try_from(parking.attempts).unwrap_or(i32::MAX);
    let failing_for = match behind {
        Some(_) => 0.0,
        None => (chrono::Utc::now() - parking.first_failure)
            .to_std()
            .map_or(0.0, |d| d.as_secs_f64()),
    };
    c.execute(
        &format!(
            r#"INSERT INTO "eventsource_projection_dead_letters" ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, now() - make_interval(secs => $7), now(), $8, false) ON CONFLICT ("projection", "position") DO NOTHING"#
        ),
        &[
            &projection,
            &parking.position,
            &parking.partition,
            &parking.payload,
            &parking.error,
            &attempts,
            &failing_for,
            &behind,
        ],
    )
    .await
    .map_err(query_error)?;
    Ok(())
}

/// The first parked position of each of `partitions` that has one.
pub(super) async fn heads<C: GenericClient + Sync>(
    c: &C,
    projection: &str,
    partitions: &[&str],
) -> Result<HashMap<String, i64>> {
    if partitions.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = c
        .query(
            r#"SELECT "partition_key", min("position") FROM "eventsource_projection_dead_letters" WHERE "projection" = $1 AND "partition_key" = ANY($2) GROUP BY "partition_key""#,
            &[&projection, &partitions],
        )
        .await
        .map_err(query_error)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}
