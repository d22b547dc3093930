//! Coordination primitives built on the lock ports: several keys at once
//! ([`acquire_many`]) and counting semaphores ([`Semaphore`]).
//!
//! Everything here is generic over [`DistributedLock`](crate::DistributedLock)
//! and imports only [`ports`](crate::ports), so it works with
//! `PostgresLockManager`, `InMemoryLockManager` and any third-party
//! implementation of the port. How each primitive maps to advisory-lock
//! ids (for services in other languages) is in `docs/primitives.md`.

mod multi;
mod multi_guard;
mod semaphore;
mod semaphore_permit;

pub use multi::acquire_many;
pub use multi_guard::MultiLockGuard;
pub use semaphore::{Semaphore, MAX_PERMITS};
pub use semaphore_permit::SemaphorePermit;
