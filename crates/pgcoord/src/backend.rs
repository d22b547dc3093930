//! For implementers of the lock traits: what a [`LockGuard`](crate::LockGuard)
//! is built from.
//!
//! Code that only *uses* locks never needs this module. A third-party
//! manager (and its run of the conformance suite in `pgcoord-testkit`)
//! builds its guards with [`LockGuard::new`](crate::LockGuard::new) from a
//! [`GuardBackend`] and a [`LossSignal`](crate::LossSignal), which a
//! [`LeaseClock`] can drive.

pub use crate::ports::locks::{BoxFuture, GuardBackend};
pub use crate::ports::loss::LeaseClock;
