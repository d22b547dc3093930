//! The raw baselines of projection catch-up: the same work as
//! `ReadModelProjection::catch_up` (`batch` 1) and `catch_up_batched` over
//! the `Tally` model, in plain SQL on one connection: per transaction
//! `BEGIN`, read the checkpoint, per event the `get` and the `RETURNING`
//! upsert of its tally, then advance the checkpoint and `COMMIT`.
//! tokio-postgres with statements prepared once; rusqlite on the calling
//! thread with its statement cache. The checkpoint advance is the plain
//! one (ours also notifies listeners once per batch).

use std::time::Instant;

use uuid::Uuid;

use super::fixture::feed;
use crate::Res;

const PG_COLS: &str = "id, created_at, updated_at, version, deleted_at, total";
const CHECKPOINTS: &str = "eventsource_projection_checkpoints";

/// Events/s of the raw catch-up on PostgreSQL (the tables must exist).
pub(super) async fn pg_catch_up_raw(url: &str, events: usize, batch: usize) -> Res<f64> {
    // The library's TLS connector, as PostgresDatabase's sessions use:
    // both sides on the same transport.
    let mut raw =
        crate::probe::connect(&crate::ctx::user_options(url)?, "bench/catch_up_raw").await?;
    let name = format!("bench-raw-{}", Uuid::new_v4());
    let read = raw
        .prepare(&format!(
            "SELECT position FROM {CHECKPOINTS} WHERE projection = $1 FOR UPDATE"
        ))
        .await?;
    let get = raw
        .prepare(&format!(
            "SELECT {PG_COLS} FROM bench_tallies WHERE id = $1 AND deleted_at IS NULL"
        ))
        .await?;
    let upsert = raw
        .prepare(&format!(
            "INSERT INTO bench_tallies ({PG_COLS}) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (id) DO UPDATE SET total = EXCLUDED.total, updated_at = EXCLUDED.updated_at, \
             version = bench_tallies.version + 1 RETURNING {PG_COLS}"
        ))
        .await?;
    let advance = raw
        .prepare(&format!(
            "INSERT INTO {CHECKPOINTS} AS c (projection, position, updated_at) VALUES ($1, $2, now()) \
             ON CONFLICT (projection) DO UPDATE SET position = EXCLUDED.position, \
             updated_at = EXCLUDED.updated_at WHERE c.position < EXCLUDED.position RETURNING 1"
        ))
        .await?;
    let feed = feed(events);
    let start = Instant::now();
    for chunk in feed.chunks(batch.max(1)) {
        let tx = raw.transaction().await?;
        let checkpoint: Option<i64> = tx.query_opt(&read, &[&name]).await?.map(|r| r.get(0));
        let mut last = None;
        for (position, (id, amount)) in chunk {
            if checkpoint.is_some_and(|c| *position <= c) {
                continue;
            }
            let now = chrono::Utc::now();
            let (created, version, total): (chrono::DateTime<chrono::Utc>, i64, i64) =
                match tx.query_opt(&get, &[id]).await? {
                    Some(r) => (r.get(1), r.get(3), r.get(5)),
                    None => (now, 0, 0),
                };
            let none: Option<chrono::DateTime<chrono::Utc>> = None;
            let row = tx
                .query_one(
                    &upsert,
                    &[id, &created, &now, &version, &none, &(total + amount)],
                )
                .await?;
            std::hint::black_box(row.get::<_, i64>(5));
            last = Some(*position);
        }
        if let Some(last) = last {
            tx.query(&advance, &[&name, &last]).await?;
        }
        tx.commit().await?;
    }
    let rate = events as f64 / start.elapsed().as_secs_f64();
    raw.batch_execute("DELETE FROM bench_tallies").await?;
    raw.execute(
        &format!("DELETE FROM {CHECKPOINTS} WHERE projection = $1"),
        &[&name],
    )
    .await?;
    Ok(rate)
}

/// Events/s of the raw catch-up on the SQLite file at `path` (the tables
/// must exist).
pub(super) fn sqlite_catch_up_raw(path: &std::path::Path, events: usize, batch: usize) -> Res<f64> {
    let raw = rusqlite::Connection::open(path)?;
    raw.busy_timeout(std::time::Duration::from_secs(5))?;
    let name = format!("bench-raw-{}", Uuid::new_v4());
    let ts = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let read = format!("SELECT position FROM {CHECKPOINTS} WHERE projection = ?1");
    let get = format!("SELECT {PG_COLS} FROM bench_tallies WHERE id = ?1 AND deleted_at IS NULL");
    let upsert = format!(
        "INSERT INTO bench_tallies ({PG_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (id) DO UPDATE SET total = excluded.total, updated_at = excluded.updated_at, \
         version = bench_tallies.version + 1 RETURNING {PG_COLS}"
    );
    let advance = format!(
        "INSERT INTO {CHECKPOINTS} AS c (projection, position, updated_at) \
         VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) \
         ON CONFLICT (projection) DO UPDATE SET position = excluded.position, \
         updated_at = excluded.updated_at WHERE c.position < excluded.position RETURNING 1"
    );
    let feed = feed(events);
    let start = Instant::now();
    for chunk in feed.chunks(batch.max(1)) {
        raw.execute_batch("BEGIN IMMEDIATE")?;
        let checkpoint: Option<i64> = {
            use rusqlite::OptionalExtension;
            let mut s = raw.prepare_cached(&read)?;
            s.query_row([&name], |r| r.get(0)).optional()?
        };
        let mut last = None;
        for (position, (id, amount)) in chunk {
            if checkpoint.is_some_and(|c| *position <= c) {
                continue;
            }
            let id = id.hyphenated().to_string();
            let now = ts(chrono::Utc::now());
            let found = {
                use rusqlite::OptionalExtension;
                let mut s = raw.prepare_cached(&get)?;
                s.query_row([&id], |r| {
                    Ok((
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(5)?,
                    ))
                })
                .optional()?
            };
            let (created, version, total) = found.unwrap_or_else(|| (now.clone(), 0, 0));
            let mut s = raw.prepare_cached(&upsert)?;
            let stored: i64 = s.query_row(
                rusqlite::params![
                    id,
                    created,
                    now,
                    version,
                    Option::<String>::None,
                    total + amount
                ],
                |r| r.get(5),
            )?;
            std::hint::black_box(stored);
            last = Some(*position);
        }
        if let Some(last) = last {
            let mut s = raw.prepare_cached(&advance)?;
            let mut rows = s.query(rusqlite::params![name, last])?;
            std::hint::black_box(rows.next()?.is_some());
        }
        raw.execute_batch("COMMIT")?;
    }
    let rate = events as f64 / start.elapsed().as_secs_f64();
    raw.execute_batch("DELETE FROM bench_tallies")?;
    raw.execute(
        &format!("DELETE FROM {CHECKPOINTS} WHERE projection = ?1"),
        [&name],
    )?;
    Ok(rate)
}
