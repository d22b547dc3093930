//! Cases on ordering and paging: NULL placement, byte-wise text, limit and
//! offset, `find_one`, and counting and truncating.

use pgcoord::readmodels::{Direction, Filter, Query, ReadModelRepository};

use super::{find_names, names, seed, seed_five, strs, Ctx, Item, Outcome};

pub(super) async fn order_ascending_puts_nulls_last<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn order_descending_puts_nulls_first<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn text_orders_byte_wise<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn order_with_limit<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn offset_skips_rows<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn find_one_keeps_order_offset_and_include_deleted<
    R: ReadModelRepository<Item>,
>(
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

pub(super) async fn count_with_and_without_filters<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn truncate_counts_every_row<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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
