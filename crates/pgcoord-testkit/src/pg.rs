//! A throwaway PostgreSQL for tests, demos and benchmarks.
//!
//! [`TestDatabase::create`] gives each caller its own database (advisory
//! locks are per database, so tests that use different databases never
//! interfere and can run in parallel):
//!
//! - when `EVENTSOURCE_TEST_DATABASE_URL` is set, on that server (the
//!   database is dropped again when the value is dropped);
//! - otherwise on one private cluster per process, created with `initdb`
//!   and started with `pg_ctl` from the installed server binaries (through
//!   `runuser -u postgres` when running as root) in a temporary directory on
//!   a free port, with `fsync=off` ([`TestCluster`], from `pgcoord-cluster`).
//!   A small reaper process stops the cluster and removes its directory
//!   once this process has exited.
//!
//! Fault tests that kill backends or restart the server start their own
//! cluster with [`TestCluster::start`], never the shared one.

use std::sync::atomic::AtomicU64;

use pgcoord::{
    error::{BackendError, BackendErrorKind},
    Error,
};

mod database;
pub use database::TestDatabase;
// The cluster itself lives in `pgcoord-cluster`, which `eventsource demo`
// boots too (so the shipped tool does not link this test kit).
pub use pgcoord_cluster::{free_port, is_root, ClusterOptions, StopMode, TestCluster};

/// The environment variable naming an existing server to test against.
pub const TEST_DATABASE_URL_ENV: &str = "EVENTSOURCE_TEST_DATABASE_URL";

pub(crate) static COUNTER: AtomicU64 = AtomicU64::new(0);

pub(crate) fn harness_error(msg: impl Into<String>) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, msg))
}
