//! Coordination primitives built on the lock ports.
//!
//! - [`acquire_many`]: every key of a set or none, in canonical order, with
//!   one [`MultiLockGuard`] for the set.
//! - [`Semaphore`]: at most N holders of a name across processes
//!   ([`SemaphorePermit`]), on advisory locks alone.
//! - [`Election`]: leader election with terms (fencing tokens), a loss
//!   signal, resign, and who leads now ([`LeaderObserver`], a stream of
//!   changes). Generic over [`DistributedLock`](crate::DistributedLock);
//!   observing is implemented for the in-memory and PostgreSQL managers
//!   (`election_watch.rs`, `election_pg.rs`: the only files here that
//!   import an adapter).
//!
//! `acquire_many` and `Semaphore` are generic over
//! [`DistributedLock`](crate::DistributedLock) and import only the ports.
//! How each primitive maps to advisory-lock ids (for services in other
//! languages) is in `docs/primitives.md`.

mod election;
#[cfg(feature = "postgres")]
mod election_pg;
mod election_watch;
mod multi;
mod multi_guard;
mod semaphore;
mod semaphore_permit;

pub use election::{election_key, Election, Leadership, ELECTION_KEY_PREFIX};
pub use election_watch::{Leader, LeaderObserver};
pub use multi::acquire_many;
pub use multi_guard::MultiLockGuard;
pub use semaphore::{Semaphore, MAX_PERMITS};
pub use semaphore_permit::SemaphorePermit;
