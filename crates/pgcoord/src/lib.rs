//! # pgcoord
//!
//! Cross-process locks on PostgreSQL session-level advisory locks, and
//! read-model repositories, built as ports and adapters.
//!
//! ## Locks in one screen
//!
//! Code that needs "only one of us does this" depends on the
//! [`DistributedLock`] trait. In production it gets a
//! [`PostgresLockManager`]; in its tests, an [`InMemoryLockManager`]:
//!
//! ```
//! use pgcoord::{DistributedLock, InMemoryLockManager, LockRegistry};
//!
//! async fn nightly_job(locks: &impl DistributedLock) -> pgcoord::Result<bool> {
//!     // One attempt: if another process runs the job, skip it.
//!     let Some(guard) = locks.try_lock("job:nightly").await? else {
//!         return Ok(false);
//!     };
//!     // ... the job; `guard.lost()` resolves if the lock is lost ...
//!     guard.release().await?;
//!     Ok(true)
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let locks = InMemoryLockManager::new(Some("test".into()));
//! assert!(nightly_job(&locks).await?);
//!
//! // Held elsewhere: the job is skipped.
//! let other = locks.acquire("job:nightly", None).await?;
//! assert!(!nightly_job(&locks).await?);
//! other.release().await?;
//! assert_eq!(locks.held_lock_count(), 0);
//! # Ok::<(), pgcoord::Error>(())
//! # }).unwrap();
//! ```
//!
//! With PostgreSQL:
//!
//! ```no_run
//! # async fn run() -> pgcoord::Result<()> {
//! use std::time::Duration;
//! use pgcoord::{DistributedLock, PostgresLockManager};
//!
//! let locks = PostgresLockManager::builder("postgres://app@db.internal/app".parse()?)
//!     .holder_id("worker-7")
//!     .build()?;
//! let guard = locks.acquire("cutover:tenant-42", Some(Duration::from_secs(30))).await?;
//! // ... exactly one process in the fleet is here ...
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## What the lock calls promise
//!
//! | call | waits? | result when held elsewhere | releases |
//! | --- | --- | --- | --- |
//! | [`acquire(key, timeout)`](DistributedLock::acquire) | up to `timeout` (`None`: forever; zero: one attempt) | [`Error::LockAcquisition`] with [`AcquireFailure::Timeout`](error::AcquireFailure::Timeout) | the [`LockGuard`]: `release().await`, or on drop, on every path |
//! | [`try_lock(key)`](DistributedLock::try_lock) | never behind a holder; a manager with no open session connects first (up to `connect_timeout`, 10 s by default, against a silent server) | `Ok(None)` | the guard |
//! | [`try_lock(key)`](DistributedLock::try_lock) then [`into_manual()`](LockGuard::into_manual) | like `try_lock` | `Ok(None)` | you, with [`release(key)`](DistributedLock::release) |
//! | [`with_lock(key, timeout, f)`](DistributedLock::with_lock) | like `acquire` | like `acquire` | after `f`; `f` is stopped with [`Error::LockLost`] if the lock is lost |
//!
//! Every async method documents its **cancel safety** in tokio's sense
//! (dropping the future and calling again loses nothing). In short: dropping
//! any future of this crate at any await point leaks no lock and no
//! database session; `try_lock` is cancel safe;
//! `acquire` is not (a dropped wait loses its place in the queue). Every error is one [`Error`] whose kinds you inspect
//! with methods ([`Error::is_timeout`], [`Error::is_lock_lost`],
//! [`Error::is_not_held`], [`Error::key`], [`Error::as_backend`]).
//!
//! Lock ids are derived from keys by [`lock_id_for_key`], bit-exact with the
//! Python library `eventsource-py`, so services in both languages exclude each
//! other. See `docs/design.md` for the session model.
//!
//! ## Features
//!
//! | feature | default | gives |
//! | --- | --- | --- |
//! | `postgres` | yes | [`PostgresLockManager`], holder inspection, and with `readmodels` the PostgreSQL read-model repository |
//! | `readmodels` | yes | the read-model toolkit: its ports, the in-memory repository, schema generation, projections |
//! | `derive` | yes | `#[derive(ReadModel)]` (turns on `readmodels`) |
//! | `metrics` | yes | lock metrics through the `metrics` facade |
//! | `sqlite` | no | the SQLite read-model repository (turns on `readmodels`) |
//!
//! A service that needs only locks compiles none of the read-model code:
//! `pgcoord = { version = "0.1", default-features = false, features =
//! ["postgres"] }`. Without features the crate is the lock ports and the
//! in-memory lock manager, with no database driver in the dependency tree. The conformance suites and the
//! throwaway-PostgreSQL harness live in the separate `pgcoord-testkit`
//! crate, so nothing a service ships contains them.
//!
//! ## Dependencies
//!
//! ```sh
//! cargo add pgcoord
//! cargo add tokio --features macros,rt-multi-thread   # for #[tokio::main]
//! cargo add serde --features derive                   # read models only
//! ```
//!
//! Types of a few other crates appear in this crate's API; use them through
//! pgcoord's re-exports, which are always the versions pgcoord was built
//! with, instead of adding them yourself: [`pgcoord::uuid`](uuid) (read
//! models' ids), [`pgcoord::chrono`](chrono) (timestamps),
//! [`pgcoord::serde_json`](serde_json) (JSON columns),
//! [`pgcoord::tokio_util`](tokio_util) (the `CancellationToken` that stops a
//! projection runner), [`pgcoord::futures_util`](futures_util) (`StreamExt`
//! for an election's `watch`), with feature `postgres`
//! `pgcoord::tokio_postgres` (the `Transaction` of [`postgres::acquire_xact`]
//! and [`postgres::fencing::check`]) and `pgcoord::deadpool_postgres`, and
//! with feature `sqlite` `pgcoord::rusqlite` (the `Connection` of
//! `SqliteDatabase::call`). If you add one of them to your own manifest
//! anyway, keep it at the same major version (uuid 1, chrono 0.4,
//! serde_json 1, tokio-util 0.7, futures-util 0.3, tokio-postgres 0.7,
//! deadpool-postgres 0.14, rusqlite 0.32). `#[derive(ReadModel)]` needs `serde` with
//! `derive` in your manifest, since `#[derive(Serialize, Deserialize)]`
//! generates code that names `::serde`.
//!
//! ## Observability
//!
//! `acquire`, `try_lock` and a manual lock's `release(key)` run in
//! `tracing` spans
//! (`eventsource.lock.*`, with key, lock id, outcome and wait time) and emit
//! DEBUG events; every read-model repository call runs in a span
//! `eventsource.readmodel.<operation>` with OpenTelemetry's database field
//! names. Without a subscriber they cost next to nothing. Names, fields and
//! exporting to an OpenTelemetry collector: `docs/observability.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod adapters;
pub mod coordination;
mod ports;

pub mod backend;
pub mod error;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod inspect;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub mod readmodels;

// The README and docs/*.md as doc tests (never compiled into the crate).
#[cfg(all(doctest, feature = "postgres", feature = "readmodels"))]
mod doc_pages;

pub use ports::dyn_lock::DynLockManager;
pub use ports::error::{Error, Result};
pub use ports::lock_id::{lock_id_for_key, MAX_KEY_LEN};
pub use ports::locks::{
    migration_lock_key, DistributedLock, LockGuard, LockInfo, LockRegistry, LossSignal,
    DEFAULT_MIGRATION_OPERATION,
};
pub use ports::shared_locks::{LockMode, SharedLock};

pub use adapters::memory::InMemoryLockManager;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use adapters::postgres::{ConnectOptions, PostgresLockManager};

// The crates whose types appear in this crate's public API, so that an
// application names them at the versions pgcoord was built with (a
// `uuid` 2 or a `tokio-postgres` 0.8 in the application's own manifest
// would be different types). See "Dependencies" above.

/// `uuid` (1.x): [`readmodels::ReadModelMeta::new`] takes a `Uuid`, and
/// [`migration_lock_key`] a tenant's.
pub use uuid;

/// `chrono` (0.4): [`LockInfo::acquired_at`] and the read models'
/// timestamps are `DateTime<Utc>`.
pub use chrono;

/// `serde_json` (1.x): JSON columns and dead-letter payloads are
/// `serde_json::Value`.
pub use serde_json;

/// `tokio-util` (0.7): a projection runner stops on a `CancellationToken`,
/// and [`LossSignal::from_token`] and leaders' work loops use one.
pub use tokio_util;

/// `futures-util` (0.3): [`coordination::Election::watch`] is a `Stream`,
/// read with `futures_util::StreamExt::next`.
pub use futures_util;

/// `rusqlite` (0.32): [`readmodels::sqlite::SqliteDatabase::call`] hands
/// your closure its `Connection`; a `rusqlite::Error` converts into
/// [`Error`] with `?`.
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use rusqlite;

/// `tokio-postgres` (0.7): [`postgres::acquire_xact`] and
/// [`postgres::fencing::check`] take your own `Transaction`.
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use tokio_postgres;

/// `deadpool-postgres` (0.14): the pool underneath the PostgreSQL read-model
/// database (`PostgresDatabase::pool`).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use deadpool_postgres;
