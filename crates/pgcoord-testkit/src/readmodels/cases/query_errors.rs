//! Cases on invalid queries: an unknown field, order key or operator and a
//! mistyped operand are refused before any SQL runs.

use pgcoord::readmodels::{Direction, Filter, Query, ReadModelRepository};
use pgcoord::Error;

use super::{expect_invalid, find_names, seed_five, strs, Ctx, Item, Outcome};

pub(super) async fn unknown_field_is_an_error<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn unknown_order_field_is_an_error<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    seed_five(repo).await?;
    let q = Query::new().order_by("nope", Direction::Desc);
    expect_invalid(repo.find(&q).await, "find")?;
    expect_invalid(repo.find_one(&q).await, "find_one")?;
    Ok(())
}

pub(super) async fn unknown_operator_is_an_error<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn mistyped_operand_is_an_error<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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
