//! Cases on filters: every operator, NULL semantics, empty lists, AND, and
//! the typed filters (bool, date, UUID, timestamp, decimal).

use chrono::{Duration, NaiveDate, TimeZone, Utc};
use uuid::Uuid;

use pgcoord::readmodels::{Direction, Filter, Query, ReadModelRepository};

use super::{find_names, names, seed, seed_five, strs, Ctx, Item, Outcome};

pub(super) async fn filter_eq<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn filter_ne_matches_nulls<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn filter_gt_and_gte<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn filter_lt_and_lte<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn filter_in<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn filter_not_in_matches_nulls<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn null_never_matches_eq_in_or_comparisons<R: ReadModelRepository<Item>>(
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

pub(super) async fn empty_in_matches_nothing<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().filter(Filter::is_in("quantity", Vec::<i64>::new()));
    ensure_eq!(find_names(repo, q.clone()).await?, Vec::<String>::new());
    ensure_eq!(repo.count(&q).await.ctx("count")?, 0);
    Ok(())
}

pub(super) async fn empty_not_in_matches_everything<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().filter(Filter::not_in("category", Vec::<String>::new()));
    ensure_eq!(
        find_names(repo, q.clone()).await?,
        strs(&["a", "b", "c", "d", "e"])
    );
    ensure_eq!(repo.count(&q).await.ctx("count")?, 5);
    Ok(())
}

pub(super) async fn filters_combine_with_and<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn bool_and_date_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn uuid_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn timestamp_filters<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn decimal_filters_compare_numerically<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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
