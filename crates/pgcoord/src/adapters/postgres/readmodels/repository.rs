//! [`ReadModelRepository`] for [`PostgresReadModelRepository`]: each call
//! in a span named by OpenTelemetry's database conventions (see
//! `crate::adapters::sql::telemetry`).

use super::*;
use crate::adapters::sql::telemetry::{repo_span, traced};

impl<M: ReadModel, S: PgClientSource> ReadModelRepository<M> for PostgresReadModelRepository<M, S> {
    async fn get(&self, id: Uuid) -> Result<Option<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "get"
        );
        traced(span, async move {
            let records = self
                .records(&self.table.get(id, DeletedRows::Exclude))
                .await?;
            self.first(records)
        })
        .await
    }

    async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "get_many"
        );
        traced(span, async move {
            let mut found = Vec::new();
            for chunk in ids.chunks(1000) {
                found.extend(self.records(&self.table.get_many(chunk)).await?);
            }
            let by_id: HashMap<Uuid, Record> = found.into_iter().map(|r| (r.meta.id, r)).collect();
            let ordered: Vec<Record> = ids.iter().filter_map(|id| by_id.get(id).cloned()).collect();
            self.decode_all(ordered)
        })
        .await
    }

    async fn save(&self, model: &M) -> Result<M> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "save"
        );
        traced(span, async move {
            let record = Record::from_model(model, self.table.fields())?;
            let records = self
                .records(&self.table.upsert(&record, now_micros()))
                .await?;
            self.first(records)?
                .ok_or_else(|| backend("upsert returned no row"))
        })
        .await
    }

    async fn save_many(&self, models: &[M]) -> Result<Vec<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "save_many"
        );
        traced(span, async move {
            let records = models
                .iter()
                .map(|m| Record::from_model(m, self.table.fields()))
                .collect::<Result<Vec<_>, _>>()?;
            let batches = self.batches(records);
            let stored = if batches.len() <= 1 || self.source.in_caller_transaction() {
                self.upsert_batches(batches).await?
            } else {
                // Several statements: one transaction on one connection, so a
                // failing later statement takes the earlier ones with it.
                let Some(mut client) = self.source.exclusive().await? else {
                    return Err(backend("the source lent no client for a transaction"));
                };
                let tx = client.transaction().await.map_err(query_error)?;
                let now = now_micros();
                let mut stored = Vec::with_capacity(records_len(&batches));
                for batch in &batches {
                    let stmt = self.table.upsert_many(batch, now);
                    let params = bind(&stmt);
                    let rows = tx
                        .query_typed(&stmt.sql, &typed_params(&params, &stmt))
                        .await
                        .map_err(query_error)?;
                    let rows = rows
                        .iter()
                        .map(|r| decode_row(&self.table, r))
                        .collect::<Result<Vec<_>>>()?;
                    in_input_order(batch, rows, &mut stored)?;
                }
                tx.commit().await.map_err(query_error)?;
                stored
            };
            self.decode_all(stored)
        })
        .await
    }

    async fn delete(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "delete"
        );
        traced(span, async move {
            Ok(self.touched(&self.table.delete(id)).await? > 0)
        })
        .await
    }

    async fn soft_delete(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "soft_delete"
        );
        traced(span, async move {
            Ok(self
                .touched(&self.table.set_deleted(id, true, now_micros()))
                .await?
                > 0)
        })
        .await
    }

    async fn restore(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "restore"
        );
        traced(span, async move {
            Ok(self
                .touched(&self.table.set_deleted(id, false, now_micros()))
                .await?
                > 0)
        })
        .await
    }

    async fn get_deleted(&self, id: Uuid) -> Result<Option<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "get_deleted"
        );
        traced(span, async move {
            let records = self.records(&self.table.get(id, DeletedRows::Only)).await?;
            self.first(records)
        })
        .await
    }

    async fn find_deleted(&self, query: &Query) -> Result<Vec<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "find_deleted"
        );
        traced(span, async move {
            let mut checked = query.check(self.table.fields())?;
            checked.deleted = DeletedRows::Only;
            let records = self.records(&self.table.find(&checked)).await?;
            self.decode_all(records)
        })
        .await
    }

    async fn exists(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "exists"
        );
        traced(span, async move {
            Ok(self.scalar(&self.table.exists(id)).await?.is_some())
        })
        .await
    }

    async fn find(&self, query: &Query) -> Result<Vec<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "find"
        );
        traced(span, async move {
            let checked = query.check(self.table.fields())?;
            let records = self.records(&self.table.find(&checked)).await?;
            self.decode_all(records)
        })
        .await
    }

    async fn find_one(&self, query: &Query) -> Result<Option<M>> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "find_one"
        );
        traced(span, async move {
            let mut checked = query.check(self.table.fields())?;
            checked.limit = Some(1);
            let records = self.records(&self.table.find(&checked)).await?;
            self.first(records)
        })
        .await
    }

    async fn count(&self, query: &Query) -> Result<u64> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "count"
        );
        traced(span, async move {
            let checked = query.check(self.table.fields())?;
            let n = self.scalar(&self.table.count(&checked)).await?.unwrap_or(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn truncate(&self) -> Result<u64> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "truncate"
        );
        traced(span, async move {
            let client = self.source.client().await?;
            client
                .execute(&*self.table.truncate().sql, &[])
                .await
                .map_err(query_error)
        })
        .await
    }

    async fn save_with_version_check(&self, model: &M) -> Result<M> {
        let span = repo_span!(
            "postgresql",
            self.table.table(),
            self.source.endpoint(),
            "save_with_version_check"
        );
        traced(span, async move {
            let record = Record::from_model(model, self.table.fields())?;
            let updated = self
                .records(&self.table.update_if_version(&record, now_micros()))
                .await?;
            if let Some(m) = self.first(updated)? {
                return Ok(m);
            }
            let id = record.meta.id;
            match self.scalar(&self.table.version_of(id)).await? {
                None => Err(ReadModelError::NotFound {
                    table: self.table.table().to_owned(),
                    id,
                }
                .into()),
                Some(actual) => Err(ReadModelError::VersionConflict {
                    table: self.table.table().to_owned(),
                    id,
                    expected: record.meta.version,
                    actual: Some(actual),
                }
                .into()),
            }
        })
        .await
    }
}
