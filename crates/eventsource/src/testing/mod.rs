//! Test support, reusable outside this crate (feature `testing`).
//!
//! - [`locks`]: the lock conformance suite; run it against any
//!   [`DistributedLock`](crate::DistributedLock) + [`LockRegistry`](crate::LockRegistry).
//! - `pg` (also needs feature `postgres`): a throwaway PostgreSQL cluster
//!   booted from the installed server binaries, and a fresh database per test.

pub mod locks;
pub mod readmodels;

#[cfg(feature = "postgres")]
pub mod pg;
