//! [`InMemoryReadModelRepository`]: the read-model port for one process,
//! without a database.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

use uuid::Uuid;

use crate::ports::error::Result;
use crate::ports::readmodels::storage::{now_micros, CheckedQuery, DeletedRows, Record};
use crate::ports::readmodels::{
    Applied, FieldDescriptor, Query, ReadModel, ReadModelError, ReadModelHandler,
    ReadModelRepository, TransactionalReadModels, Value,
};

mod repository;
mod unique;

type Rows = BTreeMap<Uuid, Record>;

/// A read-model repository kept in memory: the reference implementation of
/// the query semantics, and a fast stand-in for tests.
///
/// Clones share the same rows. Values are stored in their serialised form
/// ([`Record`]), so nothing a caller holds aliases what is stored, and a
/// model that cannot be stored by a SQL backend cannot be stored here
/// either.
///
/// As a [`TransactionalReadModels`] backend it runs each event against a
/// copy of the rows and publishes the copy only when the handler succeeds;
/// `apply` calls are serialised.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// # use pgcoord::readmodels::{FieldDescriptor, FieldType, ReadModel, ReadModelMeta};
/// # #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
/// # struct Category { #[serde(flatten)] meta: ReadModelMeta, name: String }
/// # impl ReadModel for Category {
/// #     fn fields() -> Vec<FieldDescriptor> { vec![FieldDescriptor::new("name", FieldType::Text)] }
/// #     fn meta(&self) -> &ReadModelMeta { &self.meta }
/// #     fn meta_mut(&mut self) -> &mut ReadModelMeta { &mut self.meta }
/// # }
/// use pgcoord::readmodels::InMemoryReadModelRepository;
/// use pgcoord::readmodels::{Filter, Query, ReadModelRepository};
///
/// let repo = InMemoryReadModelRepository::<Category>::new();
/// let saved = repo.save(&Category { meta: ReadModelMeta::new_random(), name: "books".into() }).await?;
/// assert_eq!(saved.meta.version, 1);
/// let found = repo.find(&Query::new().filter(Filter::eq("name", "books"))).await?;
/// assert_eq!(found.len(), 1);
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
pub struct InMemoryReadModelRepository<M> {
    rows: Arc<Mutex<Rows>>,
    checkpoints: Arc<Mutex<HashMap<String, i64>>>,
    apply_lock: Arc<tokio::sync::Mutex<()>>,
    fields: Arc<[FieldDescriptor]>,
    unique: Arc<[unique::UniqueIndex]>,
    table: Arc<str>,
    _model: PhantomData<fn() -> M>,
}

impl<M: ReadModel> InMemoryReadModelRepository<M> {
    /// An empty repository.
    pub fn new() -> Self {
        Self::with_rows(Rows::new())
    }

    fn with_rows(rows: Rows) -> Self {
        let table = M::table_name();
        Self {
            rows: Arc::new(Mutex::new(rows)),
            checkpoints: Arc::default(),
            apply_lock: Arc::new(tokio::sync::Mutex::new(())),
            fields: M::fields().into(),
            unique: unique::unique_indexes(&table, &M::indexes()),
            table: table.into(),
            _model: PhantomData,
        }
    }

    /// The number of stored rows, soft-deleted ones included.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no row is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn checkpoints(&self) -> MutexGuard<'_, HashMap<String, i64>> {
        self.checkpoints.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, Rows> {
        // A panic while holding the lock cannot leave `Rows` half-updated:
        // nothing that mutates them panics.
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn decode(&self, record: &Record) -> Result<M> {
        Ok(record.to_model(&self.fields)?)
    }

    fn select(&self, rows: &Rows, query: &CheckedQuery) -> Vec<Record> {
        let mut hits: Vec<&Record> = rows
            .values()
            .filter(|r| query.deleted.admits(r.meta.deleted_at.is_some()))
            .filter(|r| {
                query.filters.iter().all(|f| {
                    let value = r.column(&f.column, &self.fields).unwrap_or(Value::Null);
                    f.matches(&value)
                })
            })
            .collect();
        // `rows` iterates in id order, and the sort is stable: ties stay by id.
        if let Some(order) = &query.order {
            hits.sort_by(|a, b| {
                let va = a.column(&order.column, &self.fields).unwrap_or(Value::Null);
                let vb = b.column(&order.column, &self.fields).unwrap_or(Value::Null);
                order.compare(&va, &vb)
            });
        }
        let offset = usize::try_from(query.offset).unwrap_or(usize::MAX);
        let limit = query
            .limit
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        hits.into_iter().skip(offset).take(limit).cloned().collect()
    }

    fn find_checked(&self, query: &CheckedQuery) -> Result<Vec<M>> {
        let picked = self.select(&self.lock(), query);
        picked.iter().map(|r| self.decode(r)).collect()
    }

    /// Applies an upsert of `record` to `rows`, returning the stored record.
    fn upsert(rows: &mut Rows, mut record: Record) -> Record {
        // `updated_at` is stamped on insert too, as the reference does.
        record.meta.updated_at = now_micros();
        if let Some(stored) = rows.get(&record.meta.id) {
            record.meta.created_at = stored.meta.created_at;
            record.meta.deleted_at = stored.meta.deleted_at;
            record.meta.version = stored.meta.version + 1;
        }
        rows.insert(record.meta.id, record.clone());
        record
    }

    /// Upserts `records` in order, all or none: when a written row ends up
    /// with the key of another row under a unique index, every write is
    /// undone and the call fails as PostgreSQL's would.
    fn write(&self, rows: &mut Rows, records: Vec<Record>) -> Result<Vec<Record>> {
        if self.unique.is_empty() {
            return Ok(records.into_iter().map(|r| Self::upsert(rows, r)).collect());
        }
        let mut undo = Vec::with_capacity(records.len());
        let mut stored = Vec::with_capacity(records.len());
        for record in records {
            undo.push((record.meta.id, rows.get(&record.meta.id).cloned()));
            stored.push(Self::upsert(rows, record));
        }
        // Each written row as the batch leaves it (a repeated id: its last
        // write), against every row as the batch leaves them.
        let clash = stored.iter().find_map(|s| {
            let row = rows.get(&s.meta.id)?;
            unique::check(&self.unique, &self.table, &self.fields, rows, row).err()
        });
        if let Some(e) = clash {
            for (id, old) in undo.into_iter().rev() {
                match old {
                    Some(old) => rows.insert(id, old),
                    None => rows.remove(&id),
                };
            }
            return Err(e);
        }
        Ok(stored)
    }

    fn set_deleted(&self, id: Uuid, deleted: bool) -> bool {
        let mut rows = self.lock();
        match rows.get_mut(&id) {
            Some(r) if r.meta.deleted_at.is_some() != deleted => {
                let now = now_micros();
                r.meta.deleted_at = deleted.then_some(now);
                r.meta.updated_at = now;
                true
            }
            _ => false,
        }
    }
}

impl<M: ReadModel> Default for InMemoryReadModelRepository<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> Clone for InMemoryReadModelRepository<M> {
    fn clone(&self) -> Self {
        Self {
            rows: self.rows.clone(),
            checkpoints: self.checkpoints.clone(),
            apply_lock: self.apply_lock.clone(),
            fields: self.fields.clone(),
            unique: self.unique.clone(),
            table: self.table.clone(),
            _model: PhantomData,
        }
    }
}

impl<M> fmt::Debug for InMemoryReadModelRepository<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self.rows.lock().map(|r| r.len()).unwrap_or(0);
        f.debug_struct("InMemoryReadModelRepository")
            .field("table", &self.table)
            .field("rows", &rows)
            .finish()
    }
}

impl<M: ReadModel> TransactionalReadModels<M> for InMemoryReadModelRepository<M> {
    async fn apply<H>(&self, handler: &H, event: &H::Event) -> Result<()>
    where
        H: ReadModelHandler<Model = M>,
    {
        let _serial = self.apply_lock.lock().await;
        let snapshot = self.lock().clone();
        let staging = Self::with_rows(snapshot);
        handler.handle(event, &staging).await?;
        let staged = std::mem::take(&mut *staging.lock());
        *self.lock() = staged;
        Ok(())
    }

    async fn truncate_all(&self) -> Result<u64> {
        self.truncate().await
    }

    async fn prepare_checkpoints(&self) -> Result<()> {
        Ok(())
    }

    async fn checkpoint(&self, projection: &str) -> Result<Option<i64>> {
        Ok(self.checkpoints().get(projection).copied())
    }

    async fn checkpoint_names(&self, prefix: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .checkpoints()
            .keys()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect();
        names.sort();
        Ok(names)
    }

    async fn apply_at<H>(
        &self,
        projection: &str,
        position: i64,
        handler: &H,
        event: &H::Event,
    ) -> Result<Applied>
    where
        H: ReadModelHandler<Model = M>,
    {
        let _serial = self.apply_lock.lock().await;
        if self
            .checkpoints()
            .get(projection)
            .is_some_and(|&c| position <= c)
        {
            return Ok(Applied::Skipped);
        }
        let snapshot = self.lock().clone();
        let staging = Self::with_rows(snapshot);
        handler.handle(event, &staging).await?;
        let staged = std::mem::take(&mut *staging.lock());
        // Rows and checkpoint change together, under both locks.
        let mut rows = self.lock();
        self.checkpoints().insert(projection.to_owned(), position);
        *rows = staged;
        Ok(Applied::Applied)
    }

    async fn apply_batch_at<H>(
        &self,
        projection: &str,
        events: &[(i64, &H::Event)],
        handler: &H,
    ) -> Result<u64>
    where
        H: ReadModelHandler<Model = M>,
    {
        let _serial = self.apply_lock.lock().await;
        let mut checkpoint = self.checkpoints().get(projection).copied();
        let snapshot = self.lock().clone();
        let staging = Self::with_rows(snapshot);
        let mut applied = 0;
        for (position, event) in events {
            if checkpoint.is_some_and(|c| *position <= c) {
                continue;
            }
            handler.handle(event, &staging).await?;
            checkpoint = Some(*position);
            applied += 1;
        }
        let staged = std::mem::take(&mut *staging.lock());
        let mut rows = self.lock();
        if let Some(c) = checkpoint {
            self.checkpoints().insert(projection.to_owned(), c);
        }
        *rows = staged;
        Ok(applied)
    }

    async fn reset(&self, projection: &str) -> Result<u64> {
        let _serial = self.apply_lock.lock().await;
        let mut rows = self.lock();
        self.checkpoints().remove(projection);
        let n = rows.len() as u64;
        rows.clear();
        Ok(n)
    }
}
