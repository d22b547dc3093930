//! [`ReadModelRepository`] for [`InMemoryReadModelRepository`]: each call
//! in a span like the SQL adapters' (`db.system = "memory"`).

use super::*;
use crate::adapters::sql::telemetry::{repo_span, traced};

impl<M: ReadModel> ReadModelRepository<M> for InMemoryReadModelRepository<M> {
    async fn get(&self, id: Uuid) -> Result<Option<M>> {
        let span = repo_span!("memory", &*self.table, None, "get");
        traced(span, async move {
            let record = self
                .lock()
                .get(&id)
                .filter(|r| r.meta.deleted_at.is_none())
                .cloned();
            record.map(|r| self.decode(&r)).transpose()
        })
        .await
    }

    async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<M>> {
        let span = repo_span!("memory", &*self.table, None, "get_many");
        traced(span, async move {
            let records: Vec<Record> = {
                let rows = self.lock();
                ids.iter()
                    .filter_map(|id| rows.get(id))
                    .filter(|r| r.meta.deleted_at.is_none())
                    .cloned()
                    .collect()
            };
            records.iter().map(|r| self.decode(r)).collect()
        })
        .await
    }

    async fn save(&self, model: &M) -> Result<M> {
        let span = repo_span!("memory", &*self.table, None, "save");
        traced(span, async move {
            let record = Record::from_model(model, &self.fields)?;
            let stored = self.write(&mut self.lock(), vec![record])?;
            self.decode(&stored[0])
        })
        .await
    }

    async fn save_many(&self, models: &[M]) -> Result<Vec<M>> {
        let span = repo_span!("memory", &*self.table, None, "save_many");
        traced(span, async move {
            let records = models
                .iter()
                .map(|m| Record::from_model(m, &self.fields))
                .collect::<Result<Vec<_>, _>>()?;
            let stored = self.write(&mut self.lock(), records)?;
            stored.iter().map(|r| self.decode(r)).collect()
        })
        .await
    }

    async fn delete(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("memory", &*self.table, None, "delete");
        traced(span, async move { Ok(self.lock().remove(&id).is_some()) }).await
    }

    async fn soft_delete(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("memory", &*self.table, None, "soft_delete");
        traced(span, async move { Ok(self.set_deleted(id, true)) }).await
    }

    async fn restore(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("memory", &*self.table, None, "restore");
        traced(span, async move { Ok(self.set_deleted(id, false)) }).await
    }

    async fn get_deleted(&self, id: Uuid) -> Result<Option<M>> {
        let span = repo_span!("memory", &*self.table, None, "get_deleted");
        traced(span, async move {
            let record = self
                .lock()
                .get(&id)
                .filter(|r| r.meta.deleted_at.is_some())
                .cloned();
            record.map(|r| self.decode(&r)).transpose()
        })
        .await
    }

    async fn find_deleted(&self, query: &Query) -> Result<Vec<M>> {
        let span = repo_span!("memory", &*self.table, None, "find_deleted");
        traced(span, async move {
            let mut checked = query.check(&self.fields)?;
            checked.deleted = DeletedRows::Only;
            self.find_checked(&checked)
        })
        .await
    }

    async fn exists(&self, id: Uuid) -> Result<bool> {
        let span = repo_span!("memory", &*self.table, None, "exists");
        traced(span, async move {
            Ok(self
                .lock()
                .get(&id)
                .is_some_and(|r| r.meta.deleted_at.is_none()))
        })
        .await
    }

    async fn find(&self, query: &Query) -> Result<Vec<M>> {
        let span = repo_span!("memory", &*self.table, None, "find");
        traced(span, async move {
            let checked = query.check(&self.fields)?;
            self.find_checked(&checked)
        })
        .await
    }

    async fn find_one(&self, query: &Query) -> Result<Option<M>> {
        let span = repo_span!("memory", &*self.table, None, "find_one");
        traced(span, async move {
            let mut checked = query.check(&self.fields)?;
            checked.limit = Some(1);
            Ok(self.find_checked(&checked)?.into_iter().next())
        })
        .await
    }

    async fn count(&self, query: &Query) -> Result<u64> {
        let span = repo_span!("memory", &*self.table, None, "count");
        traced(span, async move {
            let mut checked = query.check(&self.fields)?;
            checked.limit = None;
            checked.offset = 0;
            checked.order = None;
            Ok(self.select(&self.lock(), &checked).len() as u64)
        })
        .await
    }

    async fn truncate(&self) -> Result<u64> {
        let span = repo_span!("memory", &*self.table, None, "truncate");
        traced(span, async move {
            let mut rows = self.lock();
            let n = rows.len() as u64;
            rows.clear();
            Ok(n)
        })
        .await
    }

    async fn save_with_version_check(&self, model: &M) -> Result<M> {
        let span = repo_span!("memory", &*self.table, None, "save_with_version_check");
        traced(span, async move {
            let record = Record::from_model(model, &self.fields)?;
            let stored = {
                let mut rows = self.lock();
                match rows.get(&record.meta.id) {
                    None => {
                        return Err(ReadModelError::NotFound {
                            table: self.table.to_string(),
                            id: record.meta.id,
                        }
                        .into())
                    }
                    Some(s) if s.meta.version != record.meta.version => {
                        return Err(ReadModelError::VersionConflict {
                            table: self.table.to_string(),
                            id: record.meta.id,
                            expected: record.meta.version,
                            actual: Some(s.meta.version),
                        }
                        .into())
                    }
                    Some(_) => self.write(&mut rows, vec![record])?,
                }
            };
            self.decode(&stored[0])
        })
        .await
    }
}
