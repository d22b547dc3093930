//! In-process adapters, for tests of code that needs a port.

#[cfg(feature = "readmodels")]
mod feed;
mod leader_observer;
mod locks;

#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub use feed::InMemoryFeed;
pub use locks::InMemoryLockManager;
#[cfg(feature = "readmodels")]
mod readmodels;
#[cfg(feature = "readmodels")]
#[cfg_attr(docsrs, doc(cfg(feature = "readmodels")))]
pub use readmodels::InMemoryReadModelRepository;
