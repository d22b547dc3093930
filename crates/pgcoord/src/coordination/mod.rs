//! Coordination primitives built on the lock ports.
//!
//! - [`acquire_many`]: several keys at once, all or none, in a canonical
//!   order ([`MultiLockGuard`]).
//! - [`Semaphore`]: at most N holders of a name ([`SemaphorePermit`]).
//! - [`Election`]: leader election with terms (fencing tokens), a loss
//!   signal, resign, and who leads now ([`LeaderObserver`], a stream of
//!   changes); [`Election::run_while_leading`] runs a leader's work term
//!   after term ([`LeaderTerm`]).
//! - [`once_per`]: at most one run of a key per interval, by the clock of
//!   the store that records the starts ([`RunLog`]), not the hosts' clocks.
//!
//! Everything here is generic over [`DistributedLock`](crate::DistributedLock),
//! so it works with `PostgresLockManager`, `InMemoryLockManager` and any
//! third-party implementation of the port, and imports only the ports.
//! Observing who leads needs an adapter's own view: the adapters implement
//! [`LeaderObserver`] (in their `leader_observer.rs`). How each primitive maps to
//! advisory-lock ids (for services in other languages) is in
//! `docs/primitives.md`.

mod election;
mod election_metrics;
mod election_run;
mod election_watch;
mod multi;
mod multi_guard;
mod once_per;
mod semaphore;
mod semaphore_permit;

pub use election::{election_key, Election, Leadership, ELECTION_KEY_PREFIX};
pub use election_run::LeaderTerm;
pub use election_watch::{Leader, LeaderObserver};
pub use multi::acquire_many;
pub use multi_guard::MultiLockGuard;
pub use once_per::{once_per, OncePer, RunLog, RunStart};
pub use semaphore::{Semaphore, MAX_PERMITS};
pub use semaphore_permit::SemaphorePermit;
