//! The lock ports' calls on many keys at once: `try_lock_any` (the first
//! free key of a list, in one statement) and `release_all`. Each runs in a
//! span of its own, as the single-key calls do (`lock_ports.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;

use super::lock_settle::{acquisition, mark_failed};
use super::lock_span::lock_span;
use super::manager::PostgresLockManager;
use super::metrics::{Operation, Outcome};
use crate::ports::error::Result;
use crate::ports::lock_id::checked_lock_id;
use crate::ports::locks::{BoxFuture, DistributedLock, GuardBackend, LockGuard};

impl PostgresLockManager {
    /// [`DistributedLock::try_lock_any`], in its span
    /// `eventsource.lock.try_lock_any`: the key taken (if any) is its
    /// `eventsource.lock.key`.
    pub(super) fn try_lock_any_in<'a>(
        &'a self,
        keys: &'a [&'a str],
    ) -> impl std::future::Future<Output = Result<Option<(usize, LockGuard)>>> + Send + 'a {
        let (address, port) = &self.ctx().server;
        let span = lock_span!(
            "eventsource.lock.try_lock_any",
            "try_lock_any",
            tracing::field::Empty,
            "server.address" = %address,
            "server.port" = port,
            "eventsource.lock.keys" = keys.len(),
            "eventsource.lock.id" = tracing::field::Empty,
            "eventsource.lock.fence" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "otel.status_code" = tracing::field::Empty,
        );
        async move {
            let r = self.try_any_traced(keys).await;
            let span = tracing::Span::current();
            let outcome = match &r {
                Ok(Some((i, g))) => {
                    span.record("eventsource.lock.key", keys[*i]);
                    span.record("eventsource.lock.id", g.info().lock_id);
                    if let Some(fence) = g.fence() {
                        span.record("eventsource.lock.fence", fence);
                    }
                    "acquired"
                }
                Ok(None) => "held_elsewhere",
                Err(e) => {
                    mark_failed(e);
                    "error"
                }
            };
            span.record("eventsource.lock.outcome", outcome);
            tracing::debug!(outcome, "try_lock_any finished");
            r
        }
        .instrument(span)
    }

    async fn try_any_traced(&self, keys: &[&str]) -> Result<Option<(usize, LockGuard)>> {
        let started = Instant::now();
        let zero = Some(Duration::ZERO);
        let mut ids = Vec::with_capacity(keys.len());
        for key in keys {
            match checked_lock_id(key, zero) {
                Ok(id) => ids.push((id, Arc::<str>::from(*key))),
                Err(e) => return Err(self.refused(Operation::TryLock, key, Some(started), e)),
            }
        }
        let settings = &self.ctx().settings;
        if settings.fencing || settings.single_session {
            // One try_lock each (counted each, in spans of their own).
            for (i, key) in keys.iter().enumerate() {
                if let Some(guard) = self.try_lock(key).await? {
                    return Ok(Some((i, guard)));
                }
            }
            return Ok(None);
        }
        let taken = self.state.acquirer.try_any(&ids).await;
        let first = keys.first().copied().unwrap_or_default();
        // The key taken names the prefix; with none taken, the first tried.
        let (outcome, counted_key) = match &taken {
            Ok(Some((i, _))) => (Outcome::Granted, keys[*i]),
            Ok(None) => (Outcome::Contended, first),
            Err(_) => (Outcome::Error, first),
        };
        self.record(Operation::TryLock, outcome, started.elapsed(), counted_key);
        match taken {
            Ok(Some((i, g))) => Ok(Some((i, self.guard(keys[i], ids[i].0, g)))),
            Ok(None) => Ok(None),
            Err(failure) => Err(acquisition(first, failure, zero)),
        }
    }

    /// [`LockRegistry::release_all`](crate::ports::locks::LockRegistry::release_all),
    /// in its span `eventsource.lock.release_all` (`eventsource.lock.count`:
    /// the locks released). The unlocks are sent before the first await.
    pub(super) fn release_all_in(
        &self,
    ) -> impl std::future::Future<Output = Result<usize>> + Send + 'static {
        let span = tracing::debug_span!(
            "eventsource.lock.release_all",
            "db.system" = "postgresql",
            "db.system.name" = "postgresql",
            "db.operation.name" = "release_all",
            "otel.name" = "lock release_all",
            "otel.kind" = "client",
            "eventsource.lock.outcome" = tracing::field::Empty,
            "eventsource.lock.count" = tracing::field::Empty,
        );
        let waits = span.in_scope(|| self.send_release_all());
        async move {
            let count = waits.len();
            for w in waits {
                // A lock whose session already ended is released all the same.
                let _ = w.await;
            }
            let span = tracing::Span::current();
            span.record("eventsource.lock.count", count);
            span.record("eventsource.lock.outcome", "released");
            tracing::debug!(count, "release_all finished");
            Ok(count)
        }
        .instrument(span)
    }

    /// Takes every lock held and sends its unlock; one wait per lock.
    fn send_release_all(&self) -> Vec<BoxFuture<'static, Result<()>>> {
        let items = self.ctx().holdings.take_all_held();
        let mut waits: Vec<BoxFuture<'static, Result<()>>> = Vec::with_capacity(items.len());
        for item in items {
            match item.manual {
                Some(lock) => waits.push(Box::new(lock).release()),
                None => {
                    let (tx, rx) = oneshot::channel();
                    if !item.session.send_unlock(item.lock_id, item.token, Some(tx)) {
                        self.ctx().finish(item.lock_id, item.token);
                    }
                    waits.push(Box::pin(async move {
                        let _ = rx.await;
                        Ok(())
                    }));
                }
            }
        }
        waits
    }
}
