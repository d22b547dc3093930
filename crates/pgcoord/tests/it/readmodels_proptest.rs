//! Property tests: random data and random queries give the same answers on
//! the in-memory reference repository and on each SQL backend (same rows,
//! same order, same counts).

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use pgcoord::readmodels::InMemoryReadModelRepository;
use pgcoord::readmodels::{Direction, Filter, Query, ReadModelRepository, Value};
use pgcoord_testkit::readmodels::ConformanceItem;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use uuid::Uuid;

const OWNERS: [u128; 3] = [1, 0xffff_0000, u128::MAX - 7];

fn owner(i: usize) -> Uuid {
    Uuid::from_u128(OWNERS[i])
}

fn instant(i: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap()
        + chrono::Duration::microseconds(i64::from(i) * 1_500_001)
}

fn day(i: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 2, 27).unwrap() + chrono::Duration::days(i64::from(i))
}

const NAMES: [&str; 6] = ["a", "B", "b", "é", "", "ab"];
const CATEGORIES: [&str; 3] = ["x", "y", "Y"];
const PRICES: [f64; 4] = [-1.5, 0.0, 0.5, 2.25];
const AMOUNTS: [&str; 6] = ["-0.25", "0", "1.5", "1.50", "10", "2.125"];

/// One stored row and whether it is soft-deleted.
fn item() -> impl Strategy<Value = (ConformanceItem, bool)> {
    (
        any::<u128>(),
        0..NAMES.len(),
        proptest::option::of(0..CATEGORIES.len()),
        -2i64..3,
        proptest::option::of(0..PRICES.len()),
        any::<bool>(),
        proptest::option::of(0..OWNERS.len()),
        proptest::option::of(0u32..4),
        proptest::option::of(0u32..4),
        1i64..4,
        any::<bool>(),
        proptest::option::of(0..AMOUNTS.len()),
    )
        .prop_map(
            |(id, n, c, q, p, active, o, t, d, version, deleted, amount)| {
                let mut item = ConformanceItem::new(NAMES[n]);
                item.meta.id = Uuid::from_u128(id);
                item.meta.version = version;
                item.category = c.map(|c| CATEGORIES[c].to_string());
                item.quantity = q;
                item.price = p.map(|p| PRICES[p]);
                item.active = active;
                item.owner_id = o.map(owner);
                item.due_at = t.map(instant);
                item.day = d.map(day);
                item.amount = amount.map(|a| AMOUNTS[a].to_string());
                (item, deleted)
            },
        )
}

/// A value of the given column's type, from a small domain so that filters
/// hit stored values often.
fn operand(column: &'static str, ids: Vec<Uuid>) -> BoxedStrategy<Value> {
    match column {
        "name" => (0..NAMES.len()).prop_map(|i| Value::from(NAMES[i])).boxed(),
        "category" => (0..CATEGORIES.len())
            .prop_map(|i| Value::from(CATEGORIES[i]))
            .boxed(),
        "quantity" | "version" => (-3i64..5).prop_map(Value::from).boxed(),
        "price" => prop_oneof![
            (0..PRICES.len()).prop_map(|i| Value::from(PRICES[i])),
            (-2i64..3).prop_map(Value::from),
        ]
        .boxed(),
        "active" => any::<bool>().prop_map(Value::from).boxed(),
        "amount" => prop_oneof![
            (0..AMOUNTS.len()).prop_map(|i| Value::from(AMOUNTS[i])),
            (-1i64..11).prop_map(Value::from),
        ]
        .boxed(),
        "owner_id" => (0..OWNERS.len())
            .prop_map(|i| Value::from(owner(i)))
            .boxed(),
        "due_at" => (0u32..5).prop_map(|i| Value::from(instant(i))).boxed(),
        "day" => (0u32..5).prop_map(|i| Value::from(day(i))).boxed(),
        "id" => {
            if ids.is_empty() {
                any::<u128>()
                    .prop_map(|u| Value::from(Uuid::from_u128(u)))
                    .boxed()
            } else {
                prop_oneof![
                    proptest::sample::select(ids).prop_map(Value::from),
                    any::<u128>().prop_map(|u| Value::from(Uuid::from_u128(u))),
                ]
                .boxed()
            }
        }
        other => unreachable!("no operands for {other}"),
    }
}

const COLUMNS: [&str; 11] = [
    "name", "category", "quantity", "price", "active", "owner_id", "due_at", "day", "id",
    "version", "amount",
];

fn filter(ids: Vec<Uuid>) -> impl Strategy<Value = Filter> {
    (proptest::sample::select(COLUMNS.to_vec()), 0usize..8).prop_flat_map(move |(column, op)| {
        let one = operand(column, ids.clone());
        match op {
            0 => one.prop_map(move |v| Filter::eq(column, v)).boxed(),
            1 => one.prop_map(move |v| Filter::ne(column, v)).boxed(),
            2 => one.prop_map(move |v| Filter::gt(column, v)).boxed(),
            3 => one.prop_map(move |v| Filter::gte(column, v)).boxed(),
            4 => one.prop_map(move |v| Filter::lt(column, v)).boxed(),
            5 => one.prop_map(move |v| Filter::lte(column, v)).boxed(),
            6 => proptest::collection::vec(one, 0..3)
                .prop_map(move |vs| Filter::is_in(column, vs))
                .boxed(),
            _ => proptest::collection::vec(one, 0..3)
                .prop_map(move |vs| Filter::not_in(column, vs))
                .boxed(),
        }
    })
}

fn case() -> impl Strategy<Value = (Vec<(ConformanceItem, bool)>, Query)> {
    proptest::collection::vec(item(), 0..10).prop_flat_map(|items| {
        let ids: Vec<Uuid> = items.iter().map(|(i, _)| i.meta.id).collect();
        let query = (
            proptest::collection::vec(filter(ids), 0..3),
            proptest::option::of((proptest::sample::select(COLUMNS.to_vec()), any::<bool>())),
            proptest::option::of(0u64..6),
            0u64..4,
            any::<bool>(),
        )
            .prop_map(|(filters, order, limit, offset, include_deleted)| {
                let mut q = Query::new().offset(offset).include_deleted(include_deleted);
                q.filters = filters;
                if let Some((column, asc)) = order {
                    q = q.order_by(column, if asc { Direction::Asc } else { Direction::Desc });
                }
                if let Some(limit) = limit {
                    q = q.limit(limit);
                }
                q
            });
        (Just(items), query)
    })
}

async fn load<R: ReadModelRepository<ConformanceItem>>(
    repo: &R,
    items: &[(ConformanceItem, bool)],
) -> pgcoord::Result<()> {
    repo.truncate().await?;
    for (item, deleted) in items {
        // Later duplicates of an id update the row, on every backend alike.
        repo.save(item).await?;
        if *deleted {
            repo.soft_delete(item.meta.id).await?;
        }
    }
    Ok(())
}

/// What a query returns, reduced to comparable facts (timestamps set by
/// the repositories themselves differ between backends).
fn facts(items: &[ConformanceItem]) -> Vec<(Uuid, String, i64, bool)> {
    items
        .iter()
        .map(|i| {
            (
                i.meta.id,
                i.name.clone(),
                i.meta.version,
                i.meta.deleted_at.is_some(),
            )
        })
        .collect()
}

async fn compare<A, B>(
    reference: &A,
    other: &B,
    items: &[(ConformanceItem, bool)],
    query: &Query,
) -> Result<(), TestCaseError>
where
    A: ReadModelRepository<ConformanceItem>,
    B: ReadModelRepository<ConformanceItem>,
{
    let fail = |e: pgcoord::Error| TestCaseError::fail(e.to_string());
    load(reference, items).await.map_err(fail)?;
    load(other, items).await.map_err(fail)?;
    let expected = reference.find(query).await.map_err(fail)?;
    let got = other.find(query).await.map_err(fail)?;
    prop_assert_eq!(facts(&got), facts(&expected), "find {:?}", query);
    let full: Vec<ConformanceItem> = other.find(query).await.map_err(fail)?;
    for (a, b) in full.iter().zip(&expected) {
        prop_assert_eq!(
            (
                &a.category,
                a.quantity,
                a.price,
                a.active,
                a.owner_id,
                a.due_at,
                a.day
            ),
            (
                &b.category,
                b.quantity,
                b.price,
                b.active,
                b.owner_id,
                b.due_at,
                b.day
            )
        );
    }
    prop_assert_eq!(
        other.count(query).await.map_err(fail)?,
        reference.count(query).await.map_err(fail)?,
        "count {:?}",
        query
    );
    prop_assert_eq!(
        other
            .find_one(query)
            .await
            .map_err(fail)?
            .map(|i| i.meta.id),
        reference
            .find_one(query)
            .await
            .map_err(fail)?
            .map(|i| i.meta.id),
        "find_one {:?}",
        query
    );
    prop_assert_eq!(
        facts(&other.find_deleted(query).await.map_err(fail)?),
        facts(&reference.find_deleted(query).await.map_err(fail)?),
        "find_deleted {:?}",
        query
    );
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn run_against<B: ReadModelRepository<ConformanceItem>>(
    rt: &tokio::runtime::Runtime,
    other: B,
    cases: u32,
) {
    let reference = InMemoryReadModelRepository::<ConformanceItem>::new();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&case(), |(items, query)| {
            rt.block_on(compare(&reference, &other, &items, &query))
        })
        .unwrap();
}

#[cfg(feature = "sqlite")]
#[test]
fn random_queries_agree_between_memory_and_sqlite() {
    use pgcoord::readmodels::sqlite::SqliteDatabase;
    let rt = runtime();
    let db = rt.block_on(async {
        let db = SqliteDatabase::open_in_memory().await.unwrap();
        db.create_schema::<ConformanceItem>().await.unwrap();
        db
    });
    run_against(&rt, db.repository::<ConformanceItem>(), 256);
}

#[cfg(feature = "postgres")]
#[test]
fn random_queries_agree_between_memory_and_postgres() {
    use pgcoord::readmodels::postgres::PostgresDatabase;
    let rt = runtime();
    let (_test_db, pool) = rt.block_on(async {
        let test_db = pgcoord_testkit::pg::TestDatabase::create().await.unwrap();
        let pool = PostgresDatabase::connect(&test_db.url()).await.unwrap();
        pool.create_schema::<ConformanceItem>().await.unwrap();
        (test_db, pool)
    });
    run_against(&rt, pool.repository::<ConformanceItem>(), 128);
}
