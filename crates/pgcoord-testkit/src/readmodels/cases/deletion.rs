//! Cases on deletion: hard deletes, soft deletes (twice, restored), what
//! reads and `exists` see of deleted rows, and `include_deleted`.

use uuid::Uuid;

use pgcoord::readmodels::{Filter, Query, ReadModelRepository};

use super::{find_names, names, seed, seed_five, sorted, strs, Ctx, Item, Outcome};

pub(super) async fn delete_removes_the_row<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn delete_of_missing_row_is_false<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    seed(repo, vec![Item::new("x")]).await?;
    ensure!(
        !repo.delete(Uuid::new_v4()).await.ctx("delete")?,
        "delete of a missing row said true"
    );
    ensure_eq!(repo.count(&Query::new()).await.ctx("count")?, 1);
    Ok(())
}

pub(super) async fn soft_delete_hides_the_row<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn soft_delete_twice_changes_nothing<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn restore_brings_the_row_back<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn get_deleted_and_find_deleted_see_only_deleted_rows<
    R: ReadModelRepository<Item>,
>(
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

pub(super) async fn include_deleted_shows_deleted_rows<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn exists_sees_live_rows_only<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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
