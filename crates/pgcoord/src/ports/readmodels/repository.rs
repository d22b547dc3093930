//! [`ReadModelRepository`]: the storage contract for read models.

use std::future::Future;

use uuid::Uuid;

use super::model::ReadModel;
use super::query::Query;
use crate::ports::error::Result;

/// Stores read models of one type in one table.
///
/// Every implementation passes the conformance suite in
/// `pgcoord_testkit::readmodels`, so code written against this trait
/// behaves the same on the in-memory, PostgreSQL and SQLite adapters.
///
/// # Contract
///
/// - Values go in by reference and come out as fresh values: nothing a
///   caller holds aliases what is stored.
/// - `get`, `get_many`, `exists`, `find`, `find_one` and `count` see live
///   rows only (unless a query sets `include_deleted`); `get_deleted` and
///   `find_deleted` see soft-deleted rows only.
/// - `save` is an upsert. An insert stores the model as given (its version
///   and `created_at` included) with `updated_at` set to now. An update keeps the stored `id`, `created_at` and
///   `deleted_at`, sets `updated_at` to now and `version` to the stored
///   version + 1, whatever the model's version says.
/// - `soft_delete` and `restore` change `deleted_at` and `updated_at`, never
///   `version`.
/// - Query errors ([`ReadModelError::InvalidQuery`](crate::ports::error::ReadModelError::InvalidQuery))
///   are reported before the backend is touched.
///
/// # Cancel safety
///
/// Dropping a read future loses nothing. Dropping a write future leaves the
/// write either done or not done (each call is one statement, or one
/// transaction for the `_many` calls on SQL backends); the outcome is not
/// reported.
pub trait ReadModelRepository<M: ReadModel>: Send + Sync {
    /// The live model with this id, if any.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn get(&self, id: Uuid) -> impl Future<Output = Result<Option<M>>> + Send;

    /// The live models among `ids`, in the order of `ids`; missing ids are
    /// skipped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn get_many(&self, ids: &[Uuid]) -> impl Future<Output = Result<Vec<M>>> + Send;

    /// Inserts or updates `model` (see the trait docs) and returns the
    /// stored model.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the save happened or did not.
    fn save(&self, model: &M) -> impl Future<Output = Result<M>> + Send;

    /// Saves each model in turn, as [`save`](Self::save) would; returns the
    /// stored models.
    ///
    /// # Cancel safety
    ///
    /// SQL backends run the batch in one transaction (or inside the
    /// caller's): dropped, all or none of it happened.
    fn save_many(&self, models: &[M]) -> impl Future<Output = Result<Vec<M>>> + Send;

    /// Removes the row for good. Returns whether a row went.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the delete happened or did not.
    fn delete(&self, id: Uuid) -> impl Future<Output = Result<bool>> + Send;

    /// Marks a live row deleted. Returns whether it changed anything (false
    /// when the row is missing or already soft-deleted).
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the change happened or did not.
    fn soft_delete(&self, id: Uuid) -> impl Future<Output = Result<bool>> + Send;

    /// Brings a soft-deleted row back. Returns whether it changed anything.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the change happened or did not.
    fn restore(&self, id: Uuid) -> impl Future<Output = Result<bool>> + Send;

    /// The soft-deleted model with this id, if any.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn get_deleted(&self, id: Uuid) -> impl Future<Output = Result<Option<M>>> + Send;

    /// The soft-deleted models matching `query` (its `include_deleted` is
    /// ignored).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn find_deleted(&self, query: &Query) -> impl Future<Output = Result<Vec<M>>> + Send;

    /// True when a live row has this id.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn exists(&self, id: Uuid) -> impl Future<Output = Result<bool>> + Send;

    /// The models matching `query`, ordered and paged as it says.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn find(&self, query: &Query) -> impl Future<Output = Result<Vec<M>>> + Send;

    /// The first model `query` would return (its order, offset and
    /// `include_deleted` kept, its limit replaced by 1).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn find_one(&self, query: &Query) -> impl Future<Output = Result<Option<M>>> + Send;

    /// The number of rows matching `query`'s filters and `include_deleted`
    /// (limit, offset and order are ignored).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn count(&self, query: &Query) -> impl Future<Output = Result<u64>> + Send;

    /// Removes every row, soft-deleted ones included; returns how many went.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the table was emptied or not.
    fn truncate(&self) -> impl Future<Output = Result<u64>> + Send;

    /// Updates the row only if its stored version equals `model`'s version;
    /// returns the stored model (version + 1, `updated_at` now).
    ///
    /// Fails with [`ReadModelError::NotFound`](crate::ports::error::ReadModelError::NotFound)
    /// when no row has the id, and with
    /// [`ReadModelError::VersionConflict`](crate::ports::error::ReadModelError::VersionConflict)
    /// (expected = the model's version, actual = the stored one) otherwise.
    /// Soft-deleted rows are updated like live ones.
    ///
    /// # Cancel safety
    ///
    /// One statement: dropped, the update happened or did not.
    fn save_with_version_check(&self, model: &M) -> impl Future<Output = Result<M>> + Send;
}
