//! Cases on writing and reading back: round trips, the bookkeeping an
//! insert or update stamps, `get_many`, `save_many` (repeated ids
//! included), invalid models, JSON fields, and no aliasing between what is
//! read and what is stored.

use chrono::{Duration, NaiveDate, TimeZone, Utc};
use uuid::Uuid;

use pgcoord::{
    error::ReadModelError,
    readmodels::{Direction, Filter, Query, ReadModelRepository},
};
use pgcoord::{Error, Result};

use super::{expect_invalid, names, seed, seed_five, strs, Ctx, Item, Outcome};

pub(super) async fn save_then_get_round_trips<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn insert_stamps_updated_at<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
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

pub(super) async fn get_missing_is_none<R: ReadModelRepository<Item>>(repo: &R) -> Outcome {
    seed(repo, vec![Item::new("x")]).await?;
    ensure_eq!(repo.get(Uuid::new_v4()).await.ctx("get")?, None);
    Ok(())
}

pub(super) async fn insert_keeps_the_given_version<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn update_bumps_version_and_keeps_identity<R: ReadModelRepository<Item>>(
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

pub(super) async fn get_many_keeps_order_and_skips_missing<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn save_many_stores_every_model<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn reads_and_writes_do_not_alias<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn json_round_trips_and_is_not_filterable<R: ReadModelRepository<Item>>(
    repo: &R,
) -> Outcome {
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

pub(super) async fn save_many_applies_repeated_ids_in_order<R: ReadModelRepository<Item>>(
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

pub(super) async fn invalid_models_are_rejected_before_writing<R: ReadModelRepository<Item>>(
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
    // A NUL character, which PostgreSQL cannot store in text or JSON, is
    // refused the same way on every backend.
    let mut nul_json = Item::new("json");
    nul_json.attributes = Some(serde_json::json!({ "k": "a\u{0}b" }));
    for (item, what) in [(Item::new("a\0b"), "text"), (nul_json, "JSON")] {
        ensure!(
            is_invalid(repo.save(&item).await.map(|_| ())),
            "a NUL in {what} was accepted"
        );
    }
    // Nothing of the rejected writes reached the store.
    ensure_eq!(
        repo.count(&Query::new().include_deleted(true))
            .await
            .ctx("count")?,
        1
    );
    Ok(())
}
