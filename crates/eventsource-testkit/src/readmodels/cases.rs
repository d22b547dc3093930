//! The conformance cases. Each starts on an empty table and returns
//! `Err(why)` on the first broken expectation.

use chrono::{Duration, NaiveDate, TimeZone, Utc};
use uuid::Uuid;

use super::ConformanceItem as Item;
use eventsource::ports::error::{Error, Result};
use eventsource::ports::readmodels::{
    Direction, Filter, Query, ReadModelError, ReadModelRepository,
};

type Outcome = std::result::Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

macro_rules! ensure_eq {
    ($left:expr, $right:expr $(,)?) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!(
                "{} == {} failed:\n   left: {:?}\n  right: {:?}",
                stringify!($left),
                stringify!($right),
                l,
                r
            ));
        }
    }};
}

trait Ctx<T> {
    fn ctx(self, what: &str) -> std::result::Result<T, String>;
}

impl<T> Ctx<T> for Result<T> {
    fn ctx(self, what: &str) -> std::result::Result<T, String> {
        self.map_err(|e| format!("{what}: unexpected error: {e}"))
    }
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        /// The names of every conformance case, in run order.
        pub const CASES: &[&str] = &[$(stringify!($name)),*];

        pub(super) async fn run_case<R>(name: &str, repo: &R) -> Outcome
        where
            R: ReadModelRepository<Item>,
        {
            match name {
                $(stringify!($name) => $name(repo).await,)*
                _ => Err(format!("unknown case {name}")),
            }
        }
    };
}

crate::__readmodel_case_list!(suite);

async fn seed<R: ReadModelRepository<Item>>(
    repo: &R,
    items: Vec<Item>,
) -> std::result::Result<Vec<Item>, String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(repo.save(&item).await.ctx("seeding")?);
    }
    Ok(out)
}

/// Five items: a(q1, cat x, price 1.5), b(q2, cat y), c(q3, no cat, price 3.5),
/// d(q4, cat x), e(q5, no cat, price 0.5).
async fn seed_five<R: ReadModelRepository<Item>>(
    repo: &R,
) -> std::result::Result<Vec<Item>, String> {
    seed(
        repo,
        vec![
            Item::new("a").quantity(1).category("x").price(1.5),
            Item::new("b").quantity(2).category("y"),
            Item::new("c").quantity(3).price(3.5),
            Item::new("d").quantity(4).category("x"),
            Item::new("e").quantity(5).price(0.5),
        ],
    )
    .await
}

fn names(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| i.name.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

async fn find_names<R: ReadModelRepository<Item>>(
    repo: &R,
    query: Query,
) -> std::result::Result<Vec<String>, String> {
    Ok(sorted(names(&repo.find(&query).await.ctx("find")?)))
}

fn expect_invalid<T: std::fmt::Debug>(res: Result<T>, what: &str) -> Outcome {
    match res {
        Err(Error::ReadModel(ReadModelError::InvalidQuery(_))) => Ok(()),
        other => Err(format!("{what}: expected InvalidQuery, got {other:?}")),
    }
}

async fn save_then_get_round_trips<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let mut item = Item::new("widget")
        .quantity(7)
        .category("tools")
        .price(2.25);
    item.active = false;
    item.owner_id = Some(Uuid::new_v4());
    item.due_at = Some(Utc.with_ymd_and_hms(2030, 5, 17, 8, 30, 0).unwrap());
    item.day = NaiveDate::from_ymd_opt(2030, 5, 17);
    let saved = repo.save(&item).await.ctx("save")?;
    // An insert stamps `updated_at` (see insert_stamps_updated_at).
    let mut expected = item.clone();
    expected.meta.updated_at = saved.meta.updated_at;
    ensure_eq!(saved, expected);
    let got = repo.get(item.meta.id).await.ctx("get")?;
    ensure_eq!(got, Some(expected));
    Ok(())
}

async fn insert_stamps_updated_at<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let mut item = Item::new("old");
    let long_ago = Utc.with_ymd_and_hms(2001, 1, 1, 0, 0, 0).unwrap();
    item.meta.created_at = long_ago;
    item.meta.updated_at = long_ago;
    let before = Utc::now() - Duration::seconds(1);
    let saved = repo.save(&item).await.ctx("save")?;
    ensure!(
        saved.meta.updated_at >= before,
        "updated_at not stamped on insert: {}",
        saved.meta.updated_at
    );
    ensure_eq!(saved.meta.created_at, long_ago);
    let got = repo
        .get(item.meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure_eq!(got.meta.updated_at, saved.meta.updated_at);
    Ok(())
}

async fn get_missing_is_none<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed(repo, vec![Item::new("x")]).await?;
    ensure_eq!(repo.get(Uuid::new_v4()).await.ctx("get")?, None);
    Ok(())
}

async fn insert_keeps_the_given_version<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let mut item = Item::new("v");
    item.meta.version = 7;
    let saved = repo.save(&item).await.ctx("save")?;
    ensure_eq!(saved.meta.version, 7);
    ensure_eq!(
        repo.get(item.meta.id)
            .await
            .ctx("get")?
            .map(|i| i.meta.version),
        Some(7)
    );
    Ok(())
}

async fn update_bumps_version_and_keeps_identity<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let original = repo.save(&Item::new("before")).await.ctx("insert")?;
    let mut changed = original.clone();
    changed.name = "after".into();
    changed.meta.version = 42; // ignored by an update
    changed.meta.created_at = original.meta.created_at - Duration::days(3); // ignored too
    let saved = repo.save(&changed).await.ctx("update")?;
    ensure_eq!(saved.meta.version, 2);
    ensure_eq!(saved.meta.id, original.meta.id);
    ensure_eq!(saved.meta.created_at, original.meta.created_at);
    ensure!(
        saved.meta.updated_at >= original.meta.updated_at,
        "updated_at went back: {} < {}",
        saved.meta.updated_at,
        original.meta.updated_at
    );
    let got = repo
        .get(original.meta.id)
        .await
        .ctx("get")?
        .ok_or("row vanished")?;
    ensure_eq!(got.name, "after");
    ensure_eq!(got.meta.version, 2);
    ensure_eq!(got, saved);
    let third = repo.save(&got).await.ctx("second update")?;
    ensure_eq!(third.meta.version, 3);
    Ok(())
}

async fn get_many_keeps_order_and_skips_missing<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    let ids = [s[3].meta.id, Uuid::new_v4(), s[0].meta.id, s[2].meta.id];
    let got = repo.get_many(&ids).await.ctx("get_many")?;
    ensure_eq!(names(&got), strs(&["d", "a", "c"]));
    ensure_eq!(repo.get_many(&[]).await.ctx("get_many([])")?.len(), 0);
    Ok(())
}

/// The models with `updated_at` blanked (an insert stamps it).
fn without_updated_at(items: &[Item]) -> Vec<Item> {
    let epoch = chrono::DateTime::<Utc>::UNIX_EPOCH;
    items
        .iter()
        .cloned()
        .map(|mut i| {
            i.meta.updated_at = epoch;
            i
        })
        .collect()
}

async fn save_many_stores_every_model<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let items = vec![Item::new("p"), Item::new("q"), Item::new("r")];
    let saved = repo.save_many(&items).await.ctx("save_many")?;
    ensure_eq!(without_updated_at(&saved), without_updated_at(&items));
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 3);
    let mut again = items.clone();
    again[1].name = "q2".into();
    let updated = repo.save_many(&again).await.ctx("save_many update")?;
    ensure_eq!(updated[1].meta.version, 2);
    ensure_eq!(updated[0].meta.version, 2);
    ensure_eq!(
        repo.get(items[1].meta.id).await.ctx("get")?.map(|i| i.name),
        Some("q2".to_string())
    );
    Ok(())
}

async fn delete_removes_the_row<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    ensure!(
        repo.delete(s[1].meta.id).await.ctx("delete")?,
        "delete reported no row"
    );
    ensure_eq!(repo.get(s[1].meta.id).await.ctx("get")?, None);
    ensure_eq!(
        repo.get_deleted(s[1].meta.id).await.ctx("get_deleted")?,
        None
    );
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        4
    );
    Ok(())
}

async fn delete_of_missing_row_is_false<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed(repo, vec![Item::new("x")]).await?;
    ensure!(
        !repo.delete(Uuid::new_v4()).await.ctx("delete")?,
        "delete of a missing row said true"
    );
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 1);
    Ok(())
}

async fn soft_delete_hides_the_row<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    let id = s[0].meta.id;
    ensure!(
        repo.soft_delete(id).await.ctx("soft_delete")?,
        "soft_delete said false"
    );
    ensure_eq!(repo.get(id).await.ctx("get")?, None);
    ensure!(
        !repo.exists(id).await.ctx("exists")?,
        "exists saw a deleted row"
    );
    ensure_eq!(
        find_names(repo, Query::new()).await?,
        strs(&["b", "c", "d", "e"])
    );
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 4);
    ensure_eq!(repo.get_many(&[id]).await.ctx("get_many")?.len(), 0);
    Ok(())
}

async fn soft_delete_twice_changes_nothing<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    let id = s[0].meta.id;
    ensure!(
        repo.soft_delete(id).await.ctx("soft_delete")?,
        "first soft_delete said false"
    );
    let first = repo
        .get_deleted(id)
        .await
        .ctx("get_deleted")?
        .ok_or("row not soft-deleted")?;
    ensure!(
        !repo.soft_delete(id).await.ctx("soft_delete")?,
        "second soft_delete said true"
    );
    let second = repo
        .get_deleted(id)
        .await
        .ctx("get_deleted")?
        .ok_or("row not soft-deleted")?;
    ensure_eq!(first.meta.deleted_at, second.meta.deleted_at);
    ensure_eq!(second.meta.version, 1);
    ensure!(
        !repo
            .soft_delete(Uuid::new_v4())
            .await
            .ctx("soft_delete missing")?,
        "soft_delete of a missing row said true"
    );
    Ok(())
}

async fn restore_brings_the_row_back<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    let id = s[2].meta.id;
    ensure!(
        !repo.restore(id).await.ctx("restore live")?,
        "restore of a live row said true"
    );
    repo.soft_delete(id).await.ctx("soft_delete")?;
    ensure!(repo.restore(id).await.ctx("restore")?, "restore said false");
    let back = repo
        .get(id)
        .await
        .ctx("get")?
        .ok_or("restored row not visible")?;
    ensure_eq!(back.meta.deleted_at, None);
    ensure_eq!(back.meta.version, 1);
    ensure_eq!(back.name, "c");
    ensure!(
        !repo.restore(id).await.ctx("restore again")?,
        "second restore said true"
    );
    Ok(())
}

async fn get_deleted_and_find_deleted_see_only_deleted_rows<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let s = seed_five(repo).await?;
    repo.soft_delete(s[0].meta.id).await.ctx("soft_delete a")?;
    repo.soft_delete(s[3].meta.id).await.ctx("soft_delete d")?;
    ensure_eq!(
        repo.get_deleted(s[1].meta.id)
            .await
            .ctx("get_deleted live")?,
        None
    );
    let a = repo
        .get_deleted(s[0].meta.id)
        .await
        .ctx("get_deleted")?
        .ok_or("a not found")?;
    ensure!(a.meta.deleted_at.is_some(), "deleted_at not set");
    let deleted = repo.find_deleted(&Query::new()).await.ctx("find_deleted")?;
    ensure_eq!(sorted(names(&deleted)), strs(&["a", "d"]));
    let filtered = repo
        .find_deleted(&Query::new().filter(Filter::gt("quantity", 1)))
        .await
        .ctx("find_deleted filtered")?;
    ensure_eq!(names(&filtered), strs(&["d"]));
    Ok(())
}

async fn include_deleted_shows_deleted_rows<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    repo.soft_delete(s[4].meta.id).await.ctx("soft_delete")?;
    ensure_eq!(
        find_names(repo, Query::new().include_deleted(true)).await?,
        strs(&["a", "b", "c", "d", "e"])
    );
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        5
    );
    Ok(())
}

async fn exists_sees_live_rows_only<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    ensure!(
        repo.exists(s[0].meta.id).await.ctx("exists")?,
        "live row not found"
    );
    ensure!(
        !repo.exists(Uuid::new_v4()).await.ctx("exists missing")?,
        "missing row found"
    );
    Ok(())
}

async fn filter_eq<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("category", "x"))).await?,
        strs(&["a", "d"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("quantity", 3))).await?,
        strs(&["c"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("price", 3.5))).await?,
        strs(&["c"])
    );
    Ok(())
}

async fn filter_ne_matches_nulls<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::ne("category", "x"))).await?,
        strs(&["b", "c", "e"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::ne("quantity", 1))).await?,
        strs(&["b", "c", "d", "e"])
    );
    Ok(())
}

async fn filter_gt_and_gte<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gt("quantity", 3))).await?,
        strs(&["d", "e"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gte("quantity", 3))).await?,
        strs(&["c", "d", "e"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gt("price", 1))).await?,
        strs(&["a", "c"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gte("name", "d"))).await?,
        strs(&["d", "e"])
    );
    Ok(())
}

async fn filter_lt_and_lte<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::lt("quantity", 2))).await?,
        strs(&["a"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::lte("quantity", 2))).await?,
        strs(&["a", "b"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::lte("price", 1.5))).await?,
        strs(&["a", "e"])
    );
    Ok(())
}

async fn filter_in<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::is_in("quantity", [1, 4, 9]))
        )
        .await?,
        strs(&["a", "d"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::is_in("category", ["y", "z"]))
        )
        .await?,
        strs(&["b"])
    );
    Ok(())
}

async fn filter_not_in_matches_nulls<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::not_in("category", ["x"]))).await?,
        strs(&["b", "c", "e"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::not_in("quantity", [2, 3]))
        )
        .await?,
        strs(&["a", "d", "e"])
    );
    Ok(())
}

async fn null_never_matches_eq_in_or_comparisons<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    seed_five(repo).await?;
    // b and d have a NULL price; no filter below may return them.
    for (filter, expect) in [
        (Filter::gt("price", -100), vec!["a", "c", "e"]),
        (Filter::gte("price", -100), vec!["a", "c", "e"]),
        (Filter::lt("price", 100), vec!["a", "c", "e"]),
        (Filter::lte("price", 100), vec!["a", "c", "e"]),
        (Filter::eq("price", 1.5), vec!["a"]),
        (Filter::is_in("price", [1.5, 0.5]), vec!["a", "e"]),
    ] {
        let what = format!("{filter:?}");
        let got = find_names(repo, Query::new().filter(filter)).await?;
        ensure!(
            got == strs(&expect),
            "{what}: got {got:?}, expected {expect:?}"
        );
    }
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::ne("price", 1.5))).await?,
        strs(&["b", "c", "d", "e"])
    );
    Ok(())
}

async fn empty_in_matches_nothing<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().filter(Filter::is_in("quantity", Vec::<i64>::new()));
    ensure_eq!(find_names(repo, q.clone()).await?, Vec::<String>::new());
    ensure_eq!(repo.count(&q).await.ctx("count")?, 0);
    Ok(())
}

async fn empty_not_in_matches_everything<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().filter(Filter::not_in("category", Vec::<String>::new()));
    ensure_eq!(
        find_names(repo, q.clone()).await?,
        strs(&["a", "b", "c", "d", "e"])
    );
    ensure_eq!(repo.count(&q).await.ctx("count")?, 5);
    Ok(())
}

async fn filters_combine_with_and<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new()
        .filter(Filter::eq("category", "x"))
        .filter(Filter::gt("quantity", 1));
    ensure_eq!(find_names(repo, q).await?, strs(&["d"]));
    let none = Query::new()
        .filter(Filter::eq("category", "y"))
        .filter(Filter::eq("quantity", 1));
    ensure_eq!(find_names(repo, none).await?, Vec::<String>::new());
    Ok(())
}

async fn bool_and_date_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let mut a = Item::new("a");
    a.active = false;
    a.day = NaiveDate::from_ymd_opt(2024, 2, 29);
    let mut b = Item::new("b");
    b.day = NaiveDate::from_ymd_opt(2024, 3, 1);
    seed(repo, vec![a, b, Item::new("c")]).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("active", false))).await?,
        strs(&["a"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("active", true))).await?,
        strs(&["b", "c"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gt("day", "2024-02-29"))).await?,
        strs(&["b"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::lte(
                "day",
                NaiveDate::from_ymd_opt(2024, 3, 1).unwrap()
            ))
        )
        .await?,
        strs(&["a", "b"])
    );
    Ok(())
}

async fn uuid_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let owner = Uuid::new_v4();
    let other = Uuid::new_v4();
    let mut a = Item::new("a");
    a.owner_id = Some(owner);
    let mut b = Item::new("b");
    b.owner_id = Some(other);
    let s = seed(repo, vec![a, b, Item::new("c")]).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("owner_id", owner))).await?,
        strs(&["a"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::eq("owner_id", owner.to_string()))
        )
        .await?,
        strs(&["a"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::ne("owner_id", owner))).await?,
        strs(&["b", "c"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::is_in("id", [s[1].meta.id, s[2].meta.id]))
        )
        .await?,
        strs(&["b", "c"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("id", s[0].meta.id))).await?,
        strs(&["a"])
    );
    Ok(())
}

async fn timestamp_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let t0 = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
    let mut a = Item::new("a");
    a.due_at = Some(t0);
    let mut b = Item::new("b");
    b.due_at = Some(t0 + Duration::microseconds(1));
    let mut c = Item::new("c");
    c.due_at = Some(t0 + Duration::days(400));
    seed(repo, vec![a, b, c, Item::new("d")]).await?;
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gt("due_at", t0))).await?,
        strs(&["b", "c"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::lt("due_at", "2025-01-01T00:00:00.000001Z"))
        )
        .await?,
        strs(&["a"])
    );
    let first_two = repo
        .find(&Query::new().order_by("due_at", Direction::Asc).limit(2))
        .await
        .ctx("order by due_at")?;
    ensure_eq!(names(&first_two), strs(&["a", "b"]));
    Ok(())
}

async fn unknown_field_is_an_error<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().filter(Filter::eq("no_such_field", 1));
    expect_invalid(repo.find(&q).await, "find")?;
    expect_invalid(repo.count(&q).await, "count")?;
    expect_invalid(repo.find_one(&q).await, "find_one")?;
    expect_invalid(repo.find_deleted(&q).await, "find_deleted")?;
    // A hostile name is rejected as unknown, never spliced into SQL.
    let evil = Query::new().filter(Filter::eq("name\" = 'x' OR 1=1 --", 1));
    expect_invalid(repo.find(&evil).await, "find with an injected name")?;
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 5);
    Ok(())
}

async fn unknown_order_field_is_an_error<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().order_by("nope", Direction::Desc);
    expect_invalid(repo.find(&q).await, "find")?;
    expect_invalid(repo.find_one(&q).await, "find_one")?;
    Ok(())
}

async fn unknown_operator_is_an_error<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    expect_invalid(
        Filter::parse("name", "like", "a%").map_err(Error::from),
        "parse like",
    )?;
    expect_invalid(
        Filter::parse("name", "EQ", "a").map_err(Error::from),
        "parse EQ",
    )?;
    let parsed = Filter::parse("quantity", "gte", 4).map_err(|e| format!("parse gte: {e}"))?;
    ensure_eq!(
        find_names(repo, Query::new().filter(parsed)).await?,
        strs(&["d", "e"])
    );
    let list = Filter::parse("quantity", "in", serde_json::json!([1, 2]))
        .map_err(|e| format!("parse in: {e}"))?;
    ensure_eq!(
        find_names(repo, Query::new().filter(list)).await?,
        strs(&["a", "b"])
    );
    Ok(())
}

async fn mistyped_operand_is_an_error<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    expect_invalid(
        repo.find(&Query::new().filter(Filter::eq("quantity", "three")))
            .await,
        "text for integer",
    )?;
    expect_invalid(
        repo.find(&Query::new().filter(Filter::eq("owner_id", "not-a-uuid")))
            .await,
        "bad uuid",
    )?;
    expect_invalid(
        repo.find(&Query::new().filter(Filter::eq("name", None::<String>)))
            .await,
        "NULL operand",
    )?;
    let list_on_scalar = Filter::parse("quantity", "eq", serde_json::json!([1]))
        .map_err(|e| format!("parse: {e}"))?;
    expect_invalid(
        repo.find(&Query::new().filter(list_on_scalar)).await,
        "list for eq",
    )?;
    Ok(())
}

async fn order_ascending_puts_nulls_last<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let got = repo
        .find(&Query::new().order_by("price", Direction::Asc))
        .await
        .ctx("find")?;
    let prices: Vec<Option<f64>> = got.iter().map(|i| i.price).collect();
    ensure_eq!(prices[..3].to_vec(), vec![Some(0.5), Some(1.5), Some(3.5)]);
    ensure_eq!(prices[3..].to_vec(), vec![None, None]);
    let by_name = repo
        .find(&Query::new().order_by("quantity", Direction::Asc))
        .await
        .ctx("find")?;
    ensure_eq!(names(&by_name), strs(&["a", "b", "c", "d", "e"]));
    Ok(())
}

async fn order_descending_puts_nulls_first<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let got = repo
        .find(&Query::new().order_by("category", Direction::Desc))
        .await
        .ctx("find")?;
    let cats: Vec<Option<String>> = got.iter().map(|i| i.category.clone()).collect();
    ensure_eq!(cats[..2].to_vec(), vec![None, None]);
    ensure_eq!(
        cats[2..].to_vec(),
        vec![
            Some("y".to_string()),
            Some("x".to_string()),
            Some("x".to_string())
        ]
    );
    let by_qty = repo
        .find(&Query::new().order_by("quantity", Direction::Desc))
        .await
        .ctx("find")?;
    ensure_eq!(names(&by_qty), strs(&["e", "d", "c", "b", "a"]));
    Ok(())
}

async fn text_orders_byte_wise<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed(repo, ["b", "B", "a", "é", "A", "z"].map(Item::new).to_vec()).await?;
    let got = repo
        .find(&Query::new().order_by("name", Direction::Asc))
        .await
        .ctx("find")?;
    ensure_eq!(names(&got), strs(&["A", "B", "a", "b", "z", "é"]));
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::lt("name", "a"))).await?,
        strs(&["A", "B"])
    );
    Ok(())
}

async fn order_with_limit<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let got = repo
        .find(&Query::new().order_by("quantity", Direction::Desc).limit(2))
        .await
        .ctx("find")?;
    ensure_eq!(names(&got), strs(&["e", "d"]));
    let zero = repo.find(&Query::new().limit(0)).await.ctx("limit 0")?;
    ensure_eq!(zero.len(), 0);
    Ok(())
}

async fn offset_skips_rows<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().order_by("quantity", Direction::Asc);
    ensure_eq!(
        names(&repo.find(&q.clone().offset(3)).await.ctx("offset")?),
        strs(&["d", "e"])
    );
    ensure_eq!(
        names(&repo.find(&q.clone().offset(1).limit(2)).await.ctx("page")?),
        strs(&["b", "c"])
    );
    ensure_eq!(repo.find(&q.offset(10)).await.ctx("past the end")?.len(), 0);
    // Without an order key, pages are still stable (ordered by id).
    let all = repo.find(&Query::new()).await.ctx("all")?;
    let page = repo
        .find(&Query::new().offset(2).limit(2))
        .await
        .ctx("page by id")?;
    ensure_eq!(names(&page), names(&all[2..4]));
    Ok(())
}

async fn find_one_keeps_order_offset_and_include_deleted<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let s = seed_five(repo).await?;
    let q = Query::new().order_by("quantity", Direction::Desc).limit(10);
    ensure_eq!(
        repo.find_one(&q).await.ctx("find_one")?.map(|i| i.name),
        Some("e".to_string())
    );
    ensure_eq!(
        repo.find_one(&q.clone().offset(2))
            .await
            .ctx("find_one offset")?
            .map(|i| i.name),
        Some("c".to_string())
    );
    repo.soft_delete(s[4].meta.id).await.ctx("soft_delete")?;
    ensure_eq!(
        repo.find_one(&q).await.ctx("find_one")?.map(|i| i.name),
        Some("d".to_string())
    );
    ensure_eq!(
        repo.find_one(&q.clone().include_deleted(true))
            .await
            .ctx("find_one deleted")?
            .map(|i| i.name),
        Some("e".to_string())
    );
    ensure_eq!(
        repo.find_one(&Query::new().filter(Filter::eq("name", "zz")))
            .await
            .ctx("find_one none")?,
        None
    );
    Ok(())
}

async fn count_with_and_without_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    ensure_eq!(repo.count(&Query::new()).await.ctx("count empty")?, 0);
    seed_five(repo).await?;
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 5);
    ensure_eq!(
        repo.count(&Query::new().filter(Filter::eq("category", "x")))
            .await
            .ctx("count x")?,
        2
    );
    ensure_eq!(
        repo.count(
            &Query::new()
                .limit(1)
                .offset(1)
                .order_by("name", Direction::Asc)
        )
        .await
        .ctx("count paged")?,
        5
    );
    Ok(())
}

async fn truncate_counts_every_row<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let s = seed_five(repo).await?;
    repo.soft_delete(s[0].meta.id).await.ctx("soft_delete")?;
    ensure_eq!(repo.truncate().await.ctx("truncate")?, 5);
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        0
    );
    ensure_eq!(repo.truncate().await.ctx("truncate empty")?, 0);
    Ok(())
}

async fn version_check_succeeds_on_current_version<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let stored = repo.save(&Item::new("v")).await.ctx("save")?;
    let mut next = stored.clone();
    next.quantity = 10;
    let saved = repo
        .save_with_version_check(&next)
        .await
        .ctx("version check")?;
    ensure_eq!(saved.meta.version, 2);
    ensure_eq!(saved.quantity, 10);
    ensure_eq!(saved.meta.created_at, stored.meta.created_at);
    ensure_eq!(repo.get(stored.meta.id).await.ctx("get")?, Some(saved));
    Ok(())
}

async fn version_check_rejects_stale_version<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let stored = repo.save(&Item::new("v")).await.ctx("save")?;
    repo.save(&stored).await.ctx("concurrent update")?; // now version 2
    let mut stale = stored.clone();
    stale.quantity = 99;
    match repo.save_with_version_check(&stale).await {
        Err(Error::ReadModel(ReadModelError::VersionConflict {
            id,
            expected,
            actual,
            ..
        })) => {
            ensure_eq!(id, stored.meta.id);
            ensure_eq!(expected, 1);
            ensure_eq!(actual, Some(2));
        }
        other => return Err(format!("expected a version conflict, got {other:?}")),
    }
    let got = repo
        .get(stored.meta.id)
        .await
        .ctx("get")?
        .ok_or("row vanished")?;
    ensure_eq!(got.quantity, 0);
    ensure_eq!(got.meta.version, 2);
    Ok(())
}

async fn version_check_on_absent_row_is_not_found<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let item = Item::new("ghost");
    match repo.save_with_version_check(&item).await {
        Err(Error::ReadModel(ReadModelError::NotFound { id, .. })) => ensure_eq!(id, item.meta.id),
        other => return Err(format!("expected not found, got {other:?}")),
    }
    ensure!(
        !repo.exists(item.meta.id).await.ctx("exists")?,
        "the version check inserted a row"
    );
    Ok(())
}

async fn reads_and_writes_do_not_alias<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let mut item = Item::new("orig");
    item.attributes = Some(serde_json::json!({"tags": ["a"]}));
    let mut saved = repo.save(&item).await.ctx("save")?;
    item.name = "changed after save".into();
    saved.name = "changed the returned value".into();
    saved.meta.version = 99;
    let mut got = repo
        .get(item.meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure_eq!(got.name, "orig");
    ensure_eq!(got.meta.version, 1);
    got.name = "changed a read".into();
    if let Some(serde_json::Value::Object(map)) = got.attributes.as_mut() {
        map.insert("x".into(), serde_json::json!(1));
    }
    let again = repo
        .get(item.meta.id)
        .await
        .ctx("get again")?
        .ok_or("row missing")?;
    ensure_eq!(again.name, "orig");
    ensure_eq!(again.attributes, Some(serde_json::json!({"tags": ["a"]})));
    let found = repo.find(&Query::new()).await.ctx("find")?;
    ensure_eq!(found.len(), 1);
    ensure_eq!(found[0].name, "orig");
    Ok(())
}

async fn json_round_trips_and_is_not_filterable<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let mut item = Item::new("j");
    item.attributes = Some(serde_json::json!({"n": 1, "nested": {"list": [1, "two", null, true]}}));
    repo.save(&item).await.ctx("save")?;
    let got = repo
        .get(item.meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure_eq!(got.attributes, item.attributes);
    expect_invalid(
        repo.find(&Query::new().filter(Filter::eq("attributes", "x")))
            .await,
        "filter on JSON",
    )?;
    expect_invalid(
        repo.find(&Query::new().order_by("attributes", Direction::Asc))
            .await,
        "order by JSON",
    )?;
    Ok(())
}

async fn save_many_applies_repeated_ids_in_order<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let first = Item::new("one");
    let mut second = first.clone();
    second.name = "two".into();
    let other = Item::new("other");
    let saved = repo
        .save_many(&[first.clone(), other.clone(), second])
        .await
        .ctx("save_many")?;
    ensure_eq!(names(&saved), strs(&["one", "other", "two"]));
    ensure_eq!(
        saved.iter().map(|i| i.meta.version).collect::<Vec<_>>(),
        vec![1, 1, 2]
    );
    let got = repo
        .get(first.meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure_eq!((got.name.as_str(), got.meta.version), ("two", 2));
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 2);
    Ok(())
}

async fn invalid_models_are_rejected_before_writing<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let mut bad = Item::new("zero");
    bad.meta.version = 0;
    let is_invalid =
        |r: Result<_>| matches!(r, Err(Error::ReadModel(ReadModelError::InvalidModel(_))));
    ensure!(
        is_invalid(repo.save(&bad).await.map(|_| ())),
        "save of version 0 was accepted"
    );
    ensure!(
        is_invalid(
            repo.save_many(&[Item::new("fine"), bad.clone()])
                .await
                .map(|_| ())
        ),
        "save_many with a version 0 model was accepted"
    );
    let stored = repo.save(&Item::new("stored")).await.ctx("save")?;
    let mut stale = stored.clone();
    stale.meta.version = -1;
    ensure!(
        is_invalid(repo.save_with_version_check(&stale).await.map(|_| ())),
        "version check with version -1 was accepted"
    );
    // Nothing of the rejected writes reached the store.
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        1
    );
    Ok(())
}

async fn decimal_filters_compare_numerically<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    let with = |name: &str, amount: Option<&str>| {
        let mut i = Item::new(name);
        i.amount = amount.map(str::to_owned);
        i
    };
    let s = seed(
        repo,
        vec![
            with("a", Some("12.50")),
            with("b", Some("9.99")),
            with("c", Some("100")),
            with("d", None),
            with("e", Some("-0.5")),
        ],
    )
    .await?;
    // Stored and read back exactly as written (scale included).
    let a = repo
        .get(s[0].meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure_eq!(a.amount.as_deref(), Some("12.50"));
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::eq("amount", "12.5"))).await?,
        strs(&["a"])
    );
    // As numbers, not as text: "9.99" < "10" < "12.50" < "100".
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::gt("amount", "10"))).await?,
        strs(&["a", "c"])
    );
    ensure_eq!(
        find_names(repo, Query::new().filter(Filter::lt("amount", 10))).await?,
        strs(&["b", "e"])
    );
    ensure_eq!(
        find_names(
            repo,
            Query::new().filter(Filter::not_in("amount", ["100", "9.990"]))
        )
        .await?,
        strs(&["a", "d", "e"])
    );
    let ordered = repo
        .find(&Query::new().order_by("amount", Direction::Asc))
        .await
        .ctx("order")?;
    ensure_eq!(names(&ordered), strs(&["e", "b", "a", "c", "d"]));
    Ok(())
}
