//! In-process adapters, for tests of code that needs a port.

mod leader_observer;
mod locks;

pub use locks::InMemoryLockManager;
mod readmodels;
pub use readmodels::InMemoryReadModelRepository;
