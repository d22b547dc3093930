//! Cases on optimistic concurrency: the version check on the current
//! version, a stale one, and an absent row.

use pgcoord::Error;
use pgcoord::{error::ReadModelError, readmodels::ReadModelRepository};

use super::{Ctx, Item, Outcome};

pub(super) async fn version_check_succeeds_on_current_version<R: ReadModelRepository<Item>>(
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

pub(super) async fn version_check_rejects_stale_version<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
    let stored = repo.save(&Item::new("v")).await.ctx("save")?;
    repo.save(&stored).await.ctx("concurrent update")?; // now version 2
    let mut stale = stored.clone();
    stale.quantity = 99;
    match repo.save_with_version_check(&stale).await {
        Err(Error::ReadModel(
            e @ ReadModelError::VersionConflict {
                id,
                expected,
                actual,
                ..
            },
        )) => {
            ensure_eq!(id, stored.meta.id);
            ensure_eq!(expected, 1);
            ensure_eq!(actual, Some(2));
            let text = e.to_string();
            ensure!(
                text.ends_with("expected version 1, found version 2"),
                "the message reads {text:?}"
            );
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

pub(super) async fn version_check_on_absent_row_is_not_found<R: ReadModelRepository<Item>>(
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
