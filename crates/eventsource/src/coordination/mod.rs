//! Coordination primitives built on the lock ports.
//!
//! - [`Election`]: leader election with terms (fencing tokens), a loss
//!   signal, resign, and who leads now ([`LeaderObserver`], a stream of
//!   changes). Generic over [`DistributedLock`](crate::DistributedLock);
//!   observing is implemented for the in-memory and PostgreSQL managers
//!   (`election_watch.rs`, `election_pg.rs`: the only files here that
//!   import an adapter).
//!
//! How each primitive maps to advisory-lock ids (for services in other
//! languages) is in `docs/primitives.md`.

mod election;
#[cfg(feature = "postgres")]
mod election_pg;
mod election_watch;

pub use election::{election_key, Election, Leadership, ELECTION_KEY_PREFIX};
pub use election_watch::{Leader, LeaderObserver};
