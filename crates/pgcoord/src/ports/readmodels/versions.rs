//! The rebuild contract: [`VersionedReadModels`] (a backend that keeps
//! several versions of a read model's table and switches readers from one
//! to the next in one transaction), [`VersionSwitch`] (the open switch) and
//! [`ProjectionVersions`] (what a projection has).

use std::future::Future;

use super::model::ReadModel;
use super::projection::TransactionalReadModels;
use crate::ports::error::Result;

/// The versions of one projection's table, as the backend records them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProjectionVersions {
    /// The version readers see (1 before the first rebuild).
    pub current: u32,
    /// The version a rebuild is building, if one was started and has not
    /// switched yet.
    pub building: Option<u32>,
    /// Versions switched away from whose tables are still kept (dropped on
    /// request).
    pub retired: Vec<u32>,
}

/// A backend that can build a new version of a read model's table beside
/// the one readers see, and switch readers to it in one transaction (the
/// PostgreSQL repository on a pool; the other backends do not implement
/// it).
///
/// Checkpoints: the live version keeps the projection's checkpoint under
/// its name; a version being built keeps its own under
/// `"{projection}@v{version}"`.
pub trait VersionedReadModels<M: ReadModel>: TransactionalReadModels<M> + Sized {
    /// The open switch [`begin_switch`](Self::begin_switch) returns.
    type Switch: VersionSwitch + Send;

    /// The projection's versions (version 1, nothing building, before the
    /// first rebuild). A read; no DDL.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    fn versions(&self, projection: &str)
        -> impl Future<Output = Result<ProjectionVersions>> + Send;

    /// The version a rebuild builds: the one already building (to resume
    /// it), else a new one (one past every version there was), recorded as
    /// building, with its empty table created.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, the version was recorded with its table, or
    /// neither; calling again gives the same version.
    fn start_version(&self, projection: &str) -> impl Future<Output = Result<u32>> + Send;

    /// A backend on the same database writing to and reading from
    /// `version`'s table (not the one readers see).
    fn at_version(&self, version: u32) -> Result<Self>;

    /// Drops the building version's table and checkpoint (to start the
    /// rebuild over); returns the version dropped. The live version is
    /// not touched.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one transaction.
    fn abandon_version(&self, projection: &str)
        -> impl Future<Output = Result<Option<u32>>> + Send;

    /// Opens the switch to `version`: one transaction that locks the live
    /// checkpoint (the live runner's next batch waits for it) and reads it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, the switch's transaction rolls back and the
    /// live runner goes on.
    fn begin_switch(
        &self,
        projection: &str,
        version: u32,
    ) -> impl Future<Output = Result<Self::Switch>> + Send;

    /// Drops the tables of the retired versions; returns the versions
    /// dropped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one transaction.
    fn drop_retired(&self, projection: &str) -> impl Future<Output = Result<Vec<u32>>> + Send;
}

/// An open switch from the live version to a new one (see
/// [`VersionedReadModels::begin_switch`]): while it is open the live
/// checkpoint stays where it is.
pub trait VersionSwitch {
    /// The live checkpoint, locked.
    fn live_checkpoint(&self) -> Option<i64>;

    /// In the switch's transaction: gives the new version's table the
    /// privileges granted on the old one (on PostgreSQL: the table's and
    /// its columns' grants, so a role that could read or write the table
    /// readers see still can), and the readers' name (the old one's table
    /// is kept as a retired version, with its grants),
    /// sets the live checkpoint to `checkpoint` (at or past
    /// [`live_checkpoint`](Self::live_checkpoint)), removes the new
    /// version's own checkpoint and the projection's parked events up to
    /// `checkpoint` (the new version applied them; a replay would apply
    /// them twice), and commits. Readers see the old table
    /// up to the commit and the new one after it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before the commit, nothing switched and the
    /// live runner goes on; after it, all of it happened.
    fn commit(self, checkpoint: Option<i64>) -> impl Future<Output = Result<()>> + Send;
}

/// The name a version being built keeps its checkpoint (and its runner
/// lock, `projection:{name}`) under: `"{projection}@v{version}"`.
pub fn version_name(projection: &str, version: u32) -> String {
    format!("{projection}@v{version}")
}
