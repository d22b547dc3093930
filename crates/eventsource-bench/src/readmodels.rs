//! Read-model scenarios (issue 14, part 5): the repository's `get`, `save`,
//! `save_many` of 100 and `find` on PostgreSQL and SQLite, each next to the
//! same statement prepared once and run directly (tokio-postgres on one
//! connection; rusqlite on one connection, on the calling thread), plus
//! projection catch-up speed. Sequential, one process.
//!
//! ```text
//! cargo run --release -p eventsource-bench -- --readmodels [--quick] [--rounds N] [--seconds S]
//! ```
//!
//! Every round runs each pair back to back (ours, then raw) so that load
//! elsewhere on the machine hits both alike; ratios are per round, and the
//! report gives their median and range.

use std::future::Future;
use std::time::{Duration, Instant};

use eventsource::adapters::postgres::PostgresDatabase;
use eventsource::adapters::sql::ReadModelProjection;
use eventsource::adapters::sqlite::SqliteDatabase;
use eventsource::ports::readmodels::{
    Direction, Filter, Query, ReadModel, ReadModelHandler, ReadModelMeta, ReadModelRepository,
    TransactionalReadModels,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Res;

const ROWS: usize = 2_000;
const BATCH: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "bench_orders", index(status))]
struct Order {
    #[serde(flatten)]
    meta: ReadModelMeta,
    customer: String,
    status: String,
    total_cents: i64,
    note: Option<String>,
}

fn order(i: usize) -> Order {
    Order {
        meta: ReadModelMeta::new_random(),
        customer: format!("customer-{i}"),
        status: ["open", "paid", "shipped", "closed"][i % 4].to_owned(),
        total_cents: (i * 37 % 10_000) as i64,
        note: (i % 3 == 0).then(|| format!("note {i}")),
    }
}

const COLS: &str =
    "id, created_at, updated_at, version, deleted_at, customer, status, total_cents, note";

/// Calls `op` for `secs`; returns calls per second.
async fn rate<F, Fut>(secs: Duration, mut op: F) -> Res<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Res<()>>,
{
    // Warm-up: statement caches, pages.
    for i in 0..50 {
        op(i).await?;
    }
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < secs {
        op(n).await?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// One round's ops/s per scenario, in run order.
type Round = Vec<(&'static str, f64)>;

async fn postgres_round(url: &str, secs: Duration) -> Res<Round> {
    let db = PostgresDatabase::connect(url).await?;
    db.get()
        .await?
        .batch_execute("DROP TABLE IF EXISTS bench_orders")
        .await?;
    db.create_schema::<Order>().await?;
    let repo = db.repository::<Order>();
    let rows: Vec<Order> = (0..ROWS).map(order).collect();
    for chunk in rows.chunks(500) {
        repo.save_many(chunk).await?;
    }
    let ids: Vec<Uuid> = rows.iter().map(|o| o.meta.id).collect();

    let (raw, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let get = raw
        .prepare(&format!(
            "SELECT {COLS} FROM bench_orders WHERE id = $1 AND deleted_at IS NULL"
        ))
        .await?;
    let upsert = raw
        .prepare(&format!(
            "INSERT INTO bench_orders ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (id) DO UPDATE SET customer = EXCLUDED.customer, status = EXCLUDED.status, \
             total_cents = EXCLUDED.total_cents, note = EXCLUDED.note, updated_at = EXCLUDED.updated_at, \
             version = bench_orders.version + 1 RETURNING {COLS}"
        ))
        .await?;
    let mut values = String::new();
    for r in 0..BATCH {
        let b = r * 9;
        values.push_str(&format!(
            "{}(${}, ${}, ${}, ${}, ${}, ${}, ${}, ${}, ${})",
            if r == 0 { "" } else { ", " },
            b + 1,
            b + 2,
            b + 3,
            b + 4,
            b + 5,
            b + 6,
            b + 7,
            b + 8,
            b + 9
        ));
    }
    let upsert_many = raw
        .prepare(&format!(
            "INSERT INTO bench_orders ({COLS}) VALUES {values} \
             ON CONFLICT (id) DO UPDATE SET customer = EXCLUDED.customer, status = EXCLUDED.status, \
             total_cents = EXCLUDED.total_cents, note = EXCLUDED.note, updated_at = EXCLUDED.updated_at, \
             version = bench_orders.version + 1 RETURNING {COLS}"
        ))
        .await?;
    let find = raw
        .prepare(&format!(
            "SELECT {COLS} FROM bench_orders WHERE deleted_at IS NULL AND status = $1 \
             ORDER BY total_cents DESC NULLS FIRST, id ASC LIMIT 20"
        ))
        .await?;
    let decode = |r: &tokio_postgres::Row| Order {
        meta: ReadModelMeta {
            id: r.get(0),
            created_at: r.get(1),
            updated_at: r.get(2),
            version: r.get(3),
            deleted_at: r.get(4),
        },
        customer: r.get(5),
        status: r.get(6),
        total_cents: r.get(7),
        note: r.get(8),
    };
    let mut out = Round::new();

    out.push((
        "pg_get",
        rate(secs, |i| {
            let repo = &repo;
            let id = ids[i % ROWS];
            async move {
                repo.get(id).await?.ok_or("missing")?;
                Ok(())
            }
        })
        .await?,
    ));
    out.push((
        "pg_get_raw",
        rate(secs, |i| {
            let (raw, get) = (&raw, &get);
            let id = ids[i % ROWS];
            async move {
                let row = raw.query_one(get, &[&id]).await?;
                std::hint::black_box(decode(&row));
                Ok(())
            }
        })
        .await?,
    ));

    out.push((
        "pg_save",
        rate(secs, |i| {
            let repo = &repo;
            let mut o = rows[i % ROWS].clone();
            o.total_cents = i as i64;
            async move {
                repo.save(&o).await?;
                Ok(())
            }
        })
        .await?,
    ));
    out.push((
        "pg_save_raw",
        rate(secs, |i| {
            let (raw, upsert) = (&raw, &upsert);
            let o = rows[i % ROWS].clone();
            async move {
                let now = chrono::Utc::now();
                let row = raw
                    .query_one(
                        upsert,
                        &[
                            &o.meta.id,
                            &o.meta.created_at,
                            &now,
                            &o.meta.version,
                            &o.meta.deleted_at,
                            &o.customer,
                            &o.status,
                            &(i as i64),
                            &o.note,
                        ],
                    )
                    .await?;
                std::hint::black_box(decode(&row));
                Ok(())
            }
        })
        .await?,
    ));

    out.push((
        "pg_save_many100",
        rate(secs, |i| {
            let repo = &repo;
            let start = (i * BATCH) % (ROWS - BATCH);
            let batch = &rows[start..start + BATCH];
            async move {
                repo.save_many(batch).await?;
                Ok(())
            }
        })
        .await?,
    ));
    out.push((
        "pg_save_many100_raw",
        rate(secs, |i| {
            let (raw, stmt) = (&raw, &upsert_many);
            let start = (i * BATCH) % (ROWS - BATCH);
            let batch = &rows[start..start + BATCH];
            async move {
                let now = chrono::Utc::now();
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    Vec::with_capacity(BATCH * 9);
                for o in batch {
                    params.extend([
                        &o.meta.id as &(dyn tokio_postgres::types::ToSql + Sync),
                        &o.meta.created_at,
                        &now,
                        &o.meta.version,
                        &o.meta.deleted_at,
                        &o.customer,
                        &o.status,
                        &o.total_cents,
                        &o.note,
                    ]);
                }
                let rows = raw.query(stmt, &params).await?;
                std::hint::black_box(rows.iter().map(decode).collect::<Vec<_>>());
                Ok(())
            }
        })
        .await?,
    ));

    let statuses = ["open", "paid", "shipped", "closed"];
    out.push((
        "pg_find",
        rate(secs, |i| {
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
        })
        .await?,
    ));
    out.push((
        "pg_find_raw",
        rate(secs, |i| {
            let (raw, find) = (&raw, &find);
            let status = statuses[i % 4];
            async move {
                let rows = raw.query(find, &[&status]).await?;
                std::hint::black_box(rows.iter().map(decode).collect::<Vec<_>>());
                Ok(())
            }
        })
        .await?,
    ));
    db.close();
    Ok(out)
}

async fn sqlite_round(dir: &std::path::Path, secs: Duration, round: usize) -> Res<Round> {
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

    out.push((
        "sqlite_get",
        rate(secs, |i| {
            let repo = &repo;
            let id = ids[i % ROWS];
            async move {
                repo.get(id).await?.ok_or("missing")?;
                Ok(())
            }
        })
        .await?,
    ));
    out.push((
        "sqlite_get_raw",
        rate(secs, |i| {
            let r = (|| -> rusqlite::Result<Order> {
                let mut s = raw.prepare_cached(&get_sql)?;
                s.query_row([ids[i % ROWS].hyphenated().to_string()], decode)
            })();
            async move {
                std::hint::black_box(r?);
                Ok(())
            }
        })
        .await?,
    ));

    out.push((
        "sqlite_save",
        rate(secs, |i| {
            let repo = &repo;
            let mut o = rows[i % ROWS].clone();
            o.total_cents = i as i64;
            async move {
                repo.save(&o).await?;
                Ok(())
            }
        })
        .await?,
    ));
    out.push((
        "sqlite_save_raw",
        rate(secs, |i| {
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
        })
        .await?,
    ));

    out.push((
        "sqlite_save_many100",
        rate(secs, |i| {
            let repo = &repo;
            let start = (i * BATCH) % (ROWS - BATCH);
            let batch = &rows[start..start + BATCH];
            async move {
                repo.save_many(batch).await?;
                Ok(())
            }
        })
        .await?,
    ));
    out.push((
        "sqlite_save_many100_raw",
        rate(secs, |i| {
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
        })
        .await?,
    ));

    out.push((
        "sqlite_find",
        rate(secs, |i| {
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
        })
        .await?,
    ));
    out.push((
        "sqlite_find_raw",
        rate(secs, |i| {
            let r = (|| -> rusqlite::Result<Vec<Order>> {
                let mut s = raw.prepare_cached(&find_sql)?;
                let rows = s.query_map([statuses[i % 4]], decode)?;
                rows.collect()
            })();
            async move {
                std::hint::black_box(r?);
                Ok(())
            }
        })
        .await?,
    ));
    drop(db);
    Ok(out)
}

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "bench_tallies")]
struct Tally {
    #[serde(flatten)]
    meta: ReadModelMeta,
    total: i64,
}

struct Tallies;

impl ReadModelHandler for Tallies {
    type Model = Tally;
    type Event = (Uuid, i64);

    async fn handle<R: ReadModelRepository<Tally>>(
        &self,
        e: &(Uuid, i64),
        repo: &R,
    ) -> eventsource::Result<()> {
        let mut t = repo.get(e.0).await?.unwrap_or(Tally {
            meta: ReadModelMeta::new(e.0),
            total: 0,
        });
        t.total += e.1;
        repo.save(&t).await?;
        Ok(())
    }
}

/// Events/s of a checkpointed catch-up: one transaction per event (read
/// checkpoint, get, save, advance checkpoint, commit), or `batch` events per
/// transaction.
async fn catch_up_rate<B>(backend: B, events: usize, batch: Option<usize>) -> Res<f64>
where
    B: TransactionalReadModels<Tally>,
{
    let ids: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
    let feed: Vec<(i64, (Uuid, i64))> = (0..events)
        .map(|i| ((i + 1) as i64, (ids[i % 100], 1)))
        .collect();
    let p = ReadModelProjection::new(Tallies, backend).named(format!("bench-{}", Uuid::new_v4()));
    let start = Instant::now();
    let pairs = feed.iter().map(|(pos, e)| (*pos, e));
    let done = match batch {
        None => p.catch_up(pairs).await?,
        Some(n) => p.catch_up_batched(pairs, n).await?,
    };
    let rate = done.applied as f64 / start.elapsed().as_secs_f64();
    p.reset().await?;
    Ok(rate)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 0 {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// Runs the read-model scenarios and prints the table `docs/performance.md`
/// quotes.
pub async fn run(url: &str, rounds: usize, secs: Duration, quick: bool) -> Res<()> {
    let dir = std::env::temp_dir().join(format!("eventsource-bench-rm-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let mut all: Vec<Round> = Vec::new();
    let mut catch_up: Vec<(&str, f64)> = Vec::new();
    let events = if quick { 500 } else { 2_000 };
    for round in 0..rounds {
        let mut r = postgres_round(url, secs).await?;
        r.extend(sqlite_round(&dir, secs, round).await?);
        eprintln!(
            "  round {}/{rounds}: {}",
            round + 1,
            r.iter()
                .map(|(n, v)| format!("{n} {v:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        all.push(r);
        let pg = PostgresDatabase::connect(url).await?;
        pg.create_schema::<Tally>().await?;
        let lite = SqliteDatabase::open(dir.join(format!("tally-{round}.db"))).await?;
        lite.create_schema::<Tally>().await?;
        let pg_repo = pg.repository::<Tally>();
        let lite_repo = lite.repository::<Tally>();
        catch_up.push((
            "pg_catch_up",
            catch_up_rate(pg_repo.clone(), events, None).await?,
        ));
        catch_up.push((
            "pg_catch_up_batched100",
            catch_up_rate(pg_repo, events, Some(100)).await?,
        ));
        catch_up.push((
            "sqlite_catch_up",
            catch_up_rate(lite_repo.clone(), events, None).await?,
        ));
        catch_up.push((
            "sqlite_catch_up_batched100",
            catch_up_rate(lite_repo, events, Some(100)).await?,
        ));
    }
    let names: Vec<&str> = all[0].iter().map(|(n, _)| *n).collect();
    println!();
    println!("{:<26} {:>12} {:>12}", "scenario", "median op/s", "rows/s");
    for name in &names {
        let mut v: Vec<f64> = all
            .iter()
            .filter_map(|r| r.iter().find(|(n, _)| n == name).map(|x| x.1))
            .collect();
        let m = median(&mut v);
        let rows = if name.contains("many100") {
            m * BATCH as f64
        } else {
            m
        };
        println!("{name:<26} {m:>12.0} {rows:>12.0}");
    }
    println!();
    println!(
        "{:<30} {:>8} {:>8} {:>8}",
        "ratio (per round)", "median", "min", "max"
    );
    let ratio = |num: &str, den: &str, scale: f64| {
        let mut v: Vec<f64> = all
            .iter()
            .filter_map(|r| {
                let a = r.iter().find(|(n, _)| *n == num)?.1;
                let b = r.iter().find(|(n, _)| *n == den)?.1;
                (b > 0.0).then_some(a * scale / b)
            })
            .collect();
        let m = median(&mut v);
        println!(
            "{:<30} {m:>8.2} {:>8.2} {:>8.2}",
            format!("{num}/{den}"),
            v.first().copied().unwrap_or(0.0),
            v.last().copied().unwrap_or(0.0)
        );
    };
    for backend in ["pg", "sqlite"] {
        for op in ["get", "save", "save_many100", "find"] {
            ratio(
                &format!("{backend}_{op}"),
                &format!("{backend}_{op}_raw"),
                1.0,
            );
        }
        // Rows/s of save_many(100) against rows/s of single saves.
        ratio(
            &format!("{backend}_save_many100"),
            &format!("{backend}_save"),
            BATCH as f64,
        );
    }
    println!();
    for name in [
        "pg_catch_up",
        "pg_catch_up_batched100",
        "sqlite_catch_up",
        "sqlite_catch_up_batched100",
    ] {
        let mut v: Vec<f64> = catch_up
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|x| x.1)
            .collect();
        let m = median(&mut v);
        let how = if name.contains("batched") {
            "100 events per transaction"
        } else {
            "one transaction per event"
        };
        println!(
            "{name:<26} {m:>8.0} events/s ({how}; min {:.0}, max {:.0})",
            v.first().copied().unwrap_or(0.0),
            v.last().copied().unwrap_or(0.0)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
