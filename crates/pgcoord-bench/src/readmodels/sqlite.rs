//! One round of the repository scenarios on SQLite: `get`, `save`,
//! `save_many` of 100 and `find` through the repository, each followed by
//! the same statement run directly with rusqlite on one connection, on the
//! calling thread, with its prepared-statement cache (the `_raw` rows).

use std::time::Duration;

use pgcoord::readmodels::sqlite::SqliteDatabase;
use pgcoord::readmodels::{Direction, Filter, Query, ReadModelMeta, ReadModelRepository};
use uuid::Uuid;

use super::fixture::{order, Order, BATCH, COLS, ROWS};
use super::rate::{paired, Round};
use crate::Res;

/// Fills a fresh database file `bench-{round}.db` in `dir` and measures
/// each pair; returns their ops/s.
pub(super) async fn sqlite_round(
    dir: &std::path::Path,
    secs: Duration,
    round: usize,
) -> Res<Round> {
    let path = dir.join(format!("bench-{round}.db"));
    let db = SqliteDatabase::open(&path).await?;
    db.create_schema::<Order>().await?;
    let repo = db.repository::<Order>();
    let rows: Vec<Order> = (0..ROWS).map(order).collect();
    for chunk in rows.chunks(500) {
        repo.save_many(chunk).await?;
    }
    let ids: Vec<Uuid> = rows.iter().map(|o| o.meta.id).collect();
    let raw = rusqlite::Connection::open(&path)?;
    raw.busy_timeout(Duration::from_secs(5))?;
    let ts = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let parse_ts =
        |s: String| chrono::DateTime::parse_from_rfc3339(&s).map(|t| t.with_timezone(&chrono::Utc));
    let decode = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Order> {
        let id: String = r.get(0)?;
        Ok(Order {
            meta: ReadModelMeta {
                id: Uuid::parse_str(&id).unwrap_or_default(),
                created_at: parse_ts(r.get(1)?).unwrap_or_default(),
                updated_at: parse_ts(r.get(2)?).unwrap_or_default(),
                version: r.get(3)?,
                deleted_at: r
                    .get::<_, Option<String>>(4)?
                    .and_then(|s| parse_ts(s).ok()),
            },
            customer: r.get(5)?,
            status: r.get(6)?,
            total_cents: r.get(7)?,
            note: r.get(8)?,
        })
    };
    let get_sql = format!("SELECT {COLS} FROM bench_orders WHERE id = ?1 AND deleted_at IS NULL");
    let upsert_sql = format!(
        "INSERT INTO bench_orders ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
         ON CONFLICT (id) DO UPDATE SET customer = excluded.customer, status = excluded.status, \
         total_cents = excluded.total_cents, note = excluded.note, updated_at = excluded.updated_at, \
         version = bench_orders.version + 1 RETURNING {COLS}"
    );
    let find_sql = format!(
        "SELECT {COLS} FROM bench_orders WHERE deleted_at IS NULL AND status = ?1 \
         ORDER BY total_cents DESC NULLS FIRST, id ASC LIMIT 20"
    );
    let statuses = ["open", "paid", "shipped", "closed"];
    let mut out = Round::new();

    paired(
        &mut out,
        ("sqlite_get", "sqlite_get_raw"),
        secs,
        |i| {
            let repo = &repo;
            let id = ids[i % ROWS];
            async move {
                repo.get(id).await?.ok_or("missing")?;
                Ok(())
            }
        },
        |i| {
            let r = (|| -> rusqlite::Result<Order> {
                let mut s = raw.prepare_cached(&get_sql)?;
                s.query_row([ids[i % ROWS].hyphenated().to_string()], decode)
            })();
            async move {
                std::hint::black_box(r?);
                Ok(())
            }
        },
    )
    .await?;

    paired(
        &mut out,
        ("sqlite_save", "sqlite_save_raw"),
        secs,
        |i| {
            let repo = &repo;
            let mut o = rows[i % ROWS].clone();
            o.total_cents = i as i64;
            async move {
                repo.save(&o).await?;
                Ok(())
            }
        },
        |i| {
            let o = &rows[i % ROWS];
            let r = (|| -> rusqlite::Result<Order> {
                let mut s = raw.prepare_cached(&upsert_sql)?;
                s.query_row(
                    rusqlite::params![
                        o.meta.id.hyphenated().to_string(),
                        ts(o.meta.created_at),
                        ts(chrono::Utc::now()),
                        o.meta.version,
                        Option::<String>::None,
                        o.customer,
                        o.status,
                        i as i64,
                        o.note
                    ],
                    decode,
                )
            })();
            async move {
                std::hint::black_box(r?);
                Ok(())
            }
        },
    )
    .await?;

    paired(
        &mut out,
        ("sqlite_save_many100", "sqlite_save_many100_raw"),
        secs,
        |i| {
            let repo = &repo;
            let start = (i * BATCH) % (ROWS - BATCH);
            let batch = &rows[start..start + BATCH];
            async move {
                repo.save_many(batch).await?;
                Ok(())
            }
        },
        |i| {
            let start = (i * BATCH) % (ROWS - BATCH);
            let r = (|| -> rusqlite::Result<usize> {
                let tx = raw.unchecked_transaction()?;
                let mut n = 0;
                {
                    let mut s = tx.prepare_cached(&upsert_sql)?;
                    let now = ts(chrono::Utc::now());
                    for o in &rows[start..start + BATCH] {
                        let got = s.query_row(
                            rusqlite::params![
                                o.meta.id.hyphenated().to_string(),
                                ts(o.meta.created_at),
                                now,
                                o.meta.version,
                                Option::<String>::None,
                                o.customer,
                                o.status,
                                o.total_cents,
                                o.note
                            ],
                            decode,
                        )?;
                        std::hint::black_box(got);
                        n += 1;
                    }
                }
                tx.commit()?;
                Ok(n)
            })();
            async move {
                r?;
                Ok(())
            }
        },
    )
    .await?;

    paired(
        &mut out,
        ("sqlite_find", "sqlite_find_raw"),
        secs,
        |i| {
            let repo = &repo;
            let q = Query::new()
                .filter(Filter::eq(Order::STATUS, statuses[i % 4]))
                .order_by(Order::TOTAL_CENTS, Direction::Desc)
                .limit(20);
            async move {
                let found = repo.find(&q).await?;
                std::hint::black_box(found);
                Ok(())
            }
        },
        |i| {
            let r = (|| -> rusqlite::Result<Vec<Order>> {
                let mut s = raw.prepare_cached(&find_sql)?;
                let rows = s.query_map([statuses[i % 4]], decode)?;
                rows.collect()
            })();
            async move {
                std::hint::black_box(r?);
                Ok(())
            }
        },
    )
    .await?;
    drop(db);
    Ok(out)
}
