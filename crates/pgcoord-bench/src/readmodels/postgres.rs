//! One round of the repository scenarios on PostgreSQL: `get`, `save`,
//! `save_many` of 100 and `find` through the repository, each followed by
//! the same statement prepared once and run directly with tokio-postgres
//! on one connection (the `_raw` rows).

use std::time::Duration;

use pgcoord::readmodels::postgres::PostgresDatabase;
use pgcoord::readmodels::{Direction, Filter, Query, ReadModelMeta, ReadModelRepository};
use uuid::Uuid;

use super::fixture::{order, Order, BATCH, COLS, ROWS};
use super::rate::{paired, Round};
use crate::Res;

/// Fills `bench_orders` afresh and measures each pair; returns their ops/s.
pub(super) async fn postgres_round(url: &str, secs: Duration) -> Res<Round> {
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

    // The library's TLS connector, as PostgresDatabase's sessions use:
    // both sides on the same transport.
    let raw =
        crate::probe::connect(&crate::ctx::user_options(url)?, "bench/readmodels_raw").await?;
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

    paired(
        &mut out,
        ("pg_get", "pg_get_raw"),
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
            let (raw, get) = (&raw, &get);
            let id = ids[i % ROWS];
            async move {
                let row = raw.query_one(get, &[&id]).await?;
                std::hint::black_box(decode(&row));
                Ok(())
            }
        },
    )
    .await?;

    paired(
        &mut out,
        ("pg_save", "pg_save_raw"),
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
        },
    )
    .await?;

    paired(
        &mut out,
        ("pg_save_many100", "pg_save_many100_raw"),
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
        },
    )
    .await?;

    let statuses = ["open", "paid", "shipped", "closed"];
    paired(
        &mut out,
        ("pg_find", "pg_find_raw"),
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
            let (raw, find) = (&raw, &find);
            let status = statuses[i % 4];
            async move {
                let rows = raw.query(find, &[&status]).await?;
                std::hint::black_box(rows.iter().map(decode).collect::<Vec<_>>());
                Ok(())
            }
        },
    )
    .await?;
    db.close();
    Ok(out)
}
