//! The unique index on `(category, code)`: every write path refuses a
//! second row with a taken key, as the database's index does, and writes
//! nothing; keys with a NULL in them never collide; a soft-deleted row
//! keeps its key.
//!
//! Each refusal is a failed statement, which aborts a caller's PostgreSQL
//! transaction: this case is in [`STATEMENT_ERROR_CASES`](crate::readmodels::STATEMENT_ERROR_CASES).

use pgcoord::error::{BackendErrorKind, SqlState};
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord::{Error, Result};

use super::{seed, Ctx, Item, Outcome};

/// The refusal of a unique index: a query error with SQLSTATE 23505
/// (PostgreSQL, and the in-memory repository) or `SQLITE_CONSTRAINT`.
fn expect_unique_violation<T: std::fmt::Debug>(res: Result<T>, what: &str) -> Outcome {
    match res {
        Err(Error::Backend(e))
            if e.kind() == BackendErrorKind::Query
                && e.code().is_some_and(|c| {
                    *c == SqlState::UNIQUE_VIOLATION || c.code() == "SQLITE_CONSTRAINT"
                }) =>
        {
            Ok(())
        }
        other => Err(format!(
            "{what}: expected a unique violation, got {other:?}"
        )),
    }
}

pub(super) async fn unique_indexes_reject_duplicate_keys<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let first = repo
        .save(&Item::new("first").category("x").code("k"))
        .await
        .ctx("save")?;
    let twin = Item::new("twin").category("x").code("k");
    expect_unique_violation(repo.save(&twin).await, "save of a taken key")?;
    ensure!(
        !repo.exists(twin.meta.id).await.ctx("exists")?,
        "the refused save wrote its row"
    );
    // The row itself, written again with its key, takes nothing from anyone.
    let again = repo.save(&first).await.ctx("update keeping the key")?;
    ensure_eq!(again.meta.version, 2);

    // Other keys, and keys with a NULL in them, never collide.
    let others = seed(
        repo,
        vec![
            Item::new("other category").category("y").code("k"),
            Item::new("other code").category("x").code("j"),
            Item::new("no category 1").code("k"),
            Item::new("no category 2").code("k"),
            Item::new("no code 1").category("x"),
            Item::new("no code 2").category("x"),
        ],
    )
    .await?;
    let all = Query::new().include_deleted(true);
    ensure_eq!(repo.count(&all).await.ctx("count")?, 7);

    // A batch fails as a whole, whether it collides with itself or with a
    // stored row, and writes nothing.
    let with_itself = [
        Item::new("b1").category("z").code("k"),
        Item::new("b2").category("z").code("k"),
    ];
    let with_a_row = [
        Item::new("b3").category("w").code("k"),
        Item::new("b4").category("x").code("k"),
    ];
    for (batch, what) in [
        (&with_itself, "a batch colliding with itself"),
        (&with_a_row, "a batch colliding with a stored row"),
    ] {
        expect_unique_violation(repo.save_many(batch).await, what)?;
        for item in batch {
            ensure!(
                !repo.exists(item.meta.id).await.ctx("exists")?,
                "{what}: {} was written",
                item.name
            );
        }
    }
    ensure_eq!(repo.count(&all).await.ctx("count")?, 7);

    // The version-checked save refuses a move onto a taken key.
    let mut moved = others[1].clone();
    moved.code = Some("k".into());
    expect_unique_violation(
        repo.save_with_version_check(&moved).await,
        "a version-checked move onto a taken key",
    )?;
    let kept = repo
        .get(moved.meta.id)
        .await
        .ctx("get")?
        .ok_or("row gone")?;
    ensure_eq!(kept.code.as_deref(), Some("j"));
    ensure_eq!(kept.meta.version, 1);

    // A soft-deleted row still holds its key (the index covers every row);
    // a hard delete frees it.
    ensure!(
        repo.soft_delete(first.meta.id).await.ctx("soft delete")?,
        "soft delete did nothing"
    );
    let after = Item::new("after").category("x").code("k");
    expect_unique_violation(repo.save(&after).await, "a key a soft-deleted row holds")?;
    ensure!(
        repo.delete(first.meta.id).await.ctx("delete")?,
        "no row deleted"
    );
    repo.save(&after).await.ctx("save after the delete")?;
    ensure_eq!(repo.count(&all).await.ctx("count")?, 7);
    Ok(())
}
