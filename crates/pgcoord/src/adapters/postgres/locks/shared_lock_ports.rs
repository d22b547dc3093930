//! [`PostgresLockManager`] as the [`SharedLock`] port: shared holds on
//! `pg_advisory_lock_shared`, each on a session of its own (see
//! `acquirer/shared.rs`).

use std::time::Duration;

use tracing::Instrument;

use super::lock_span::lock_span;
use super::manager::PostgresLockManager;
use super::metrics::Operation;
use crate::ports::error::Result;
use crate::ports::locks::LockGuard;
use crate::ports::shared_locks::{LockMode, SharedLock};

impl SharedLock for PostgresLockManager {
    /// Acquires a shared hold of `key` (`pg_advisory_lock_shared` on the
    /// key's usual advisory id): any number of shared holders at once, in
    /// this manager and in other processes, and none while an exclusive
    /// holder has the key. The request queues inside PostgreSQL behind every
    /// earlier request of either mode, so a writer that came first is served
    /// first, and a stream of readers never starves it.
    ///
    /// Each shared hold (and each wait for one) uses a dedicated session of
    /// its own, within [`max_wait_sessions`](crate::adapters::postgres::PostgresLockManagerBuilder::max_wait_sessions);
    /// when they are all in use, the call waits for one within `timeout`
    /// (then, or at once for a try, it fails with [`AcquireFailure::WaitSessionsBusy`](crate::ports::error::AcquireFailure::WaitSessionsBusy), not as a timeout: the key may be free). Shared holds
    /// take no fencing token. A single-session manager takes the hold on its
    /// one session (and then holds nothing else).
    ///
    /// # Cancel safety
    ///
    /// Leaks nothing when dropped at any await point: a wait nobody wants
    /// is cancelled on the server, and a grant that raced the drop is
    /// released at once. Not cancel safe in tokio's sense: a dropped wait
    /// loses its place in PostgreSQL's queue.
    fn acquire_shared(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<LockGuard>> + Send {
        self.acquire_in(Operation::Acquire, LockMode::Shared, key, timeout)
            .instrument(self.shared_span(key))
    }

    /// One attempt at a shared hold (see the trait), in the span of
    /// `acquire_shared` but counted as a try (`operation="try_lock"`).
    fn try_lock_shared(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<LockGuard>>> + Send {
        let zero = Some(Duration::ZERO);
        let attempt = self.acquire_in(Operation::TryLock, LockMode::Shared, key, zero);
        async move {
            match attempt.await {
                Ok(guard) => Ok(Some(guard)),
                Err(e) if e.is_timeout() => Ok(None),
                Err(e) => Err(e),
            }
        }
        .instrument(self.shared_span(key))
    }
}

impl PostgresLockManager {
    fn shared_span(&self, key: &str) -> tracing::Span {
        let (address, port) = &self.ctx().server;
        lock_span!(
            "eventsource.lock.acquire_shared",
            "acquire_shared",
            &*crate::ports::key_limit::shown_key(key),
            "server.address" = %address,
            "server.port" = port,
            "eventsource.lock.id" = tracing::field::Empty,
            "eventsource.lock.wait_us" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        )
    }
}
