//! Values that not every backend can store or order alike: timestamps and
//! dates outside years 0000–9999, NaN, and the sign of zero. Each is
//! refused (or normalised) the same way everywhere, before any write. And
//! decimals with more digits than a double holds, compared exactly.

use chrono::{NaiveDate, TimeZone, Utc};
use pgcoord::readmodels::{Direction, Filter, Query, ReadModelRepository};

use super::{names, seed, strs, Ctx, Error, Item, Outcome, ReadModelError};

fn invalid_model<T: std::fmt::Debug>(r: pgcoord::Result<T>, what: &str, says: &str) -> Outcome {
    match r {
        Err(Error::ReadModel(ReadModelError::InvalidModel(m))) if m.contains(says) => Ok(()),
        other => Err(format!(
            "{what}: expected InvalidModel saying {says:?}, got {other:?}"
        )),
    }
}

fn invalid_query<T: std::fmt::Debug>(r: pgcoord::Result<T>, what: &str, says: &str) -> Outcome {
    match r {
        Err(Error::ReadModel(ReadModelError::InvalidQuery(m))) if m.contains(says) => Ok(()),
        other => Err(format!(
            "{what}: expected InvalidQuery saying {says:?}, got {other:?}"
        )),
    }
}

pub(super) async fn years_outside_0000_to_9999_are_rejected_before_writing<
    R: ReadModelRepository<Item>,
>(
    repo: &R,
) -> Outcome {
    let at = |y: i32| Utc.with_ymd_and_hms(y, 1, 1, 0, 0, 0).unwrap();
    let day = |y: i32| NaiveDate::from_ymd_opt(y, 1, 1).unwrap();
    for year in [10_000, -5] {
        let mut due = Item::new("due");
        due.due_at = Some(at(year));
        invalid_model(repo.save(&due).await, "due_at", "due_at")?;
        let mut on = Item::new("day");
        on.day = Some(day(year));
        invalid_model(repo.save(&on).await, "day", "day")?;
        let mut created = Item::new("created");
        created.meta.created_at = at(year);
        invalid_model(repo.save(&created).await, "created_at", "created_at")?;
        invalid_model(
            repo.save_many(&[Item::new("fine"), due.clone()]).await,
            "save_many",
            "0000-9999",
        )?;
        invalid_query(
            repo.count(&Query::new().filter(Filter::lt("due_at", at(year))))
                .await,
            "due_at filter",
            "0000-9999",
        )?;
        invalid_query(
            repo.count(&Query::new().filter(Filter::gte("day", day(year))))
                .await,
            "day filter",
            "0000-9999",
        )?;
    }
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        0
    );
    // The bounds themselves are stored, read back and ordered.
    let mut first = Item::new("first");
    (first.due_at, first.day) = (Some(at(0)), Some(day(0)));
    let mut last = Item::new("last");
    last.due_at = Some(Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap());
    last.day = NaiveDate::from_ymd_opt(9999, 12, 31);
    let mut now = Item::new("now");
    (now.due_at, now.day) = (Some(at(2024)), Some(day(2024)));
    let s = seed(repo, vec![last.clone(), first.clone(), now]).await?;
    let back = repo
        .get(s[0].meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure_eq!((back.due_at, back.day), (last.due_at, last.day));
    for field in ["due_at", "day"] {
        let asc = repo
            .find(&Query::new().order_by(field, Direction::Asc))
            .await
            .ctx("order")?;
        ensure_eq!(names(&asc), strs(&["first", "now", "last"]));
    }
    ensure!(
        repo.count(&Query::new().filter(Filter::lt("day", "2000-01-01")))
            .await
            .ctx("count")?
            == 1,
        "only year 0 is before 2000"
    );
    Ok(())
}

pub(super) async fn nan_is_rejected_and_negative_zero_reads_back_as_zero<
    R: ReadModelRepository<Item>,
>(
    repo: &R,
) -> Outcome {
    invalid_model(
        repo.save(&Item::new("nan").price(f64::NAN)).await,
        "save NaN",
        "NaN",
    )?;
    invalid_query(
        repo.count(&Query::new().filter(Filter::eq("price", f64::NAN)))
            .await,
        "NaN operand",
        "NaN",
    )?;
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        0
    );
    let s = seed(
        repo,
        vec![
            Item::new("negzero").price(-0.0),
            Item::new("inf").price(f64::INFINITY),
            Item::new("ninf").price(f64::NEG_INFINITY),
            Item::new("one").price(1.0),
        ],
    )
    .await?;
    // Zero keeps no sign (SQLite cannot keep it), on every backend.
    let z = repo
        .get(s[0].meta.id)
        .await
        .ctx("get")?
        .ok_or("row missing")?;
    ensure!(
        z.price.is_some_and(|p| p == 0.0 && p.is_sign_positive()),
        "-0.0 read back as {:?}, not 0.0",
        z.price
    );
    let asc = repo
        .find(&Query::new().order_by("price", Direction::Asc))
        .await
        .ctx("order by price")?;
    ensure_eq!(names(&asc), strs(&["ninf", "negzero", "one", "inf"]));
    for (filter, want) in [
        (Filter::gt("price", 1.0), vec!["inf"]),
        (Filter::eq("price", 0.0), vec!["negzero"]),
        (Filter::eq("price", -0.0), vec!["negzero"]),
        (
            Filter::lt("price", f64::INFINITY),
            vec!["negzero", "ninf", "one"],
        ),
    ] {
        let what = format!("{filter:?}");
        let mut got = names(&repo.find(&Query::new().filter(filter)).await.ctx(&what)?);
        got.sort();
        ensure!(got == strs(&want), "{what}: got {got:?}, want {want:?}");
    }
    Ok(())
}

/// Decimals compare by exact value however many digits they have (on
/// SQLite, not through a double, which keeps about 15).
pub(super) async fn decimal_filters_compare_exactly_beyond_double_precision<
    R: ReadModelRepository<Item>,
>(
    repo: &R,
) -> Outcome {
    let with = |name: &str, amount: &str| {
        let mut i = Item::new(name);
        i.amount = Some(amount.to_owned());
        i
    };
    seed(
        repo,
        vec![
            with("a", "99999999999999999999"),
            with("b", "99999999999999999998"),
            with("c", "0.1"),
            with("e", "0.10000000000000001"),
            with("n", "-99999999999999999999.5"),
        ],
    )
    .await?;
    for (filter, want) in [
        (Filter::eq("amount", "99999999999999999999"), vec!["a"]),
        (Filter::eq("amount", "0.1"), vec!["c"]),
        (Filter::eq("amount", "0.100"), vec!["c"]),
        (Filter::gt("amount", "99999999999999999998"), vec!["a"]),
        (Filter::lt("amount", "0.10000000000000001"), vec!["c", "n"]),
        (Filter::lt("amount", "-99999999999999999999.4"), vec!["n"]),
        (
            Filter::is_in("amount", ["99999999999999999998", "0.10000000000000001"]),
            vec!["b", "e"],
        ),
    ] {
        let what = format!("{filter:?}");
        let mut got = names(&repo.find(&Query::new().filter(filter)).await.ctx(&what)?);
        got.sort();
        ensure!(got == strs(&want), "{what}: got {got:?}, want {want:?}");
    }
    let desc = repo
        .find(&Query::new().order_by("amount", Direction::Desc))
        .await
        .ctx("order")?;
    ensure_eq!(names(&desc), strs(&["a", "b", "e", "c", "n"]));
    Ok(())
}
