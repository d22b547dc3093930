//! In-process adapters, for tests of code that needs a port.

mod feed;
mod leader_observer;
mod locks;

pub use feed::InMemoryFeed;
pub use locks::InMemoryLockManager;
mod readmodels;
pub use readmodels::InMemoryReadModelRepository;
