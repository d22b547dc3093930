//! Test support for `pgcoord` and for third-party adapters of its ports.
//!
//! Kept out of the `pgcoord` crate so that nothing a service ships
//! contains a test suite or a cluster harness.
//!
//! - [`locks`] (feature `suites`): the lock conformance suite; run it
//!   against any [`DistributedLock`](pgcoord::DistributedLock) +
//!   [`LockRegistry`](pgcoord::LockRegistry) with one macro call,
//!   [`lock_conformance_tests!`]; the reader-writer cases of any
//!   [`SharedLock`](pgcoord::SharedLock), [`shared_lock_conformance_tests!`].
//! - [`coordination`] (feature `suites`): the suite of the coordination
//!   primitives (`try_lock_any`, `acquire_many`, `Semaphore`),
//!   [`coordination_conformance_tests!`], and of leader election,
//!   [`election_conformance_tests!`].
//! - [`hang_guard`] (feature `suites`): every case of the lock, shared-lock,
//!   coordination and election macros runs under a limit of
//!   [`hang_guard::CASE_LIMIT`] (two minutes): a case that hangs fails
//!   with its name instead of stalling the run.
//! - [`readmodels`] (feature `suites`): the read-model conformance suite.
//! - [`pg`] (feature `cluster`): a throwaway PostgreSQL cluster booted from
//!   the installed server binaries, and a fresh database per test.
//! - [`pgbouncer`] (feature `cluster`): a PgBouncer with its stock settings
//!   (only addresses, authentication and `pool_mode` set) in front of one.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

#[cfg(feature = "suites")]
pub mod coordination;
#[cfg(feature = "suites")]
pub mod hang_guard;
#[cfg(feature = "suites")]
pub mod locks;
#[cfg(feature = "suites")]
pub mod readmodels;

#[cfg(feature = "cluster")]
pub mod pg;
#[cfg(feature = "cluster")]
pub mod pgbouncer;
