//! [`ReadModelRepository`] for [`SqliteReadModelRepository`]: each call in
//! a span named by OpenTelemetry's database conventions (see
//! `crate::adapters::sql::telemetry`).

use super::*;
use crate::adapters::sql::telemetry::{repo_span, traced};

impl<M: ReadModel> ReadModelRepository<M> for SqliteReadModelRepository<M> {
    async fn get(&self, id: Uuid) -> Result<Option<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "get");
        traced(span, async move {
            self.with(move |c, t| query_first(c, t, &t.get(id, DeletedRows::Exclude)))
                .await
        })
        .await
    }

    async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "get_many");
        traced(span, async move {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let wanted = ids.to_vec();
            let records = self
                .with(move |c, t| {
                    let mut found = Vec::new();
                    for chunk in wanted.chunks(500) {
                        found.extend(query_records(c, t, &t.get_many(chunk))?);
                    }
                    Ok(found)
                })
                .await?;
            let by_id: HashMap<Uuid, Record> =
                records.into_iter().map(|r| (r.meta.id, r)).collect();
            let ordered = ids.iter().filter_map(|id| by_id.get(id).cloned()).collect();
            self.decode_all(ordered)
        })
        .await
    }

    async fn save(&self, model: &M) -> Result<M> {
        let span = repo_span!("sqlite", self.table.table(), None, "save");
        traced(span, async move {
            let record = Record::from_model(model, self.table.fields())?;
            self.with(move |c, t| query_first(c, t, &t.upsert(&record, now_micros())))
                .await?
                .ok_or_else(|| backend("upsert returned no row"))
        })
        .await
    }

    async fn save_many(&self, models: &[M]) -> Result<Vec<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "save_many");
        traced(span, async move {
            let records = models
                .iter()
                .map(|m| Record::from_model(m, self.table.fields()))
                .collect::<Result<Vec<_>, _>>()?;
            let own_tx = !self.in_transaction();
            let stored = self
                .with(move |c, t| {
                    let now = now_micros();
                    let run = |c: &Connection| -> Result<Vec<Record>> {
                        let mut out = Vec::with_capacity(records.len());
                        for r in &records {
                            out.extend(query_records(c, t, &t.upsert(r, now))?);
                        }
                        Ok(out)
                    };
                    if own_tx {
                        let tx = c.transaction().map_err(sqlite_error)?;
                        let out = run(&tx)?;
                        tx.commit().map_err(sqlite_error)?;
                        Ok(out)
                    } else {
                        run(c)
                    }
                })
                .await?;
            self.decode_all(stored)
        })
        .await
    }

    async fn delete(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("sqlite", self.table.table(), None, "delete");
        traced(span, async move {
            let n = self.with(move |c, t| execute(c, &t.delete(id))).await?;
            Ok(n > 0)
        })
        .await
    }

    async fn soft_delete(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("sqlite", self.table.table(), None, "soft_delete");
        traced(span, async move {
            let n = self
                .with(move |c, t| execute(c, &t.set_deleted(id, true, now_micros())))
                .await?;
            Ok(n > 0)
        })
        .await
    }

    async fn restore(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("sqlite", self.table.table(), None, "restore");
        traced(span, async move {
            let n = self
                .with(move |c, t| execute(c, &t.set_deleted(id, false, now_micros())))
                .await?;
            Ok(n > 0)
        })
        .await
    }

    async fn get_deleted(&self, id: Uuid) -> Result<Option<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "get_deleted");
        traced(span, async move {
            self.with(move |c, t| query_first(c, t, &t.get(id, DeletedRows::Only)))
                .await
        })
        .await
    }

    async fn find_deleted(&self, query: &Query) -> Result<Vec<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "find_deleted");
        traced(span, async move {
            let mut checked = query.check(self.table.fields())?;
            checked.deleted = DeletedRows::Only;
            let records = self
                .with(move |c, t| query_records(c, t, &t.find(&checked)))
                .await?;
            self.decode_all(records)
        })
        .await
    }

    async fn exists(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("sqlite", self.table.table(), None, "exists");
        traced(span, async move {
            let hit = self.with(move |c, t| scalar_i64(c, &t.exists(id))).await?;
            Ok(hit.is_some())
        })
        .await
    }

    async fn find(&self, query: &Query) -> Result<Vec<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "find");
        traced(span, async move {
            let checked = query.check(self.table.fields())?;
            let records = self
                .with(move |c, t| query_records(c, t, &t.find(&checked)))
                .await?;
            self.decode_all(records)
        })
        .await
    }

    async fn find_one(&self, query: &Query) -> Result<Option<M>> {
        let span = repo_span!("sqlite", self.table.table(), None, "find_one");
        traced(span, async move {
            let mut checked = query.check(self.table.fields())?;
            checked.limit = Some(1);
            let records = self
                .with(move |c, t| query_records(c, t, &t.find(&checked)))
                .await?;
            Ok(self.decode_all(records)?.into_iter().next())
        })
        .await
    }

    async fn count(&self, query: &Query) -> Result<u64> {
        let span = repo_span!("sqlite", self.table.table(), None, "count");
        traced(span, async move {
            let checked = query.check(self.table.fields())?;
            let n = self
                .with(move |c, t| scalar_i64(c, &t.count(&checked)))
                .await?
                .unwrap_or(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn truncate(&self) -> Result<u64> {
        let span = repo_span!("sqlite", self.table.table(), None, "truncate");
        traced(span, async move {
            let n = self.with(move |c, t| execute(c, &t.truncate())).await?;
            Ok(n as u64)
        })
        .await
    }

    async fn save_with_version_check(&self, model: &M) -> Result<M> {
        let span = repo_span!(
            "sqlite",
            self.table.table(),
            None,
            "save_with_version_check"
        );
        traced(span, async move {
            let record = Record::from_model(model, self.table.fields())?;
            let (id, expected) = (record.meta.id, record.meta.version);
            let (records, actual) = self
                .with(move |c, t| {
                    let updated = query_records(c, t, &t.update_if_version(&record, now_micros()))?;
                    if !updated.is_empty() {
                        return Ok((updated, None));
                    }
                    let actual = scalar_i64(c, &t.version_of(record.meta.id))?;
                    Ok((updated, actual))
                })
                .await?;
            if let Some(m) = self.decode_all(records)?.into_iter().next() {
                return Ok(m);
            }
            match actual {
                None => Err(self.not_found(id)),
                Some(actual) => Err(ReadModelError::VersionConflict {
                    table: self.table.table().to_owned(),
                    id,
                    expected,
                    actual: Some(actual),
                }
                .into()),
            }
        })
        .await
    }
}
