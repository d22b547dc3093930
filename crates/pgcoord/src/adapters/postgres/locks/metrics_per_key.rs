//! The per-key-prefix hold metrics (with
//! [`metrics_key_prefix`](crate::adapters::postgres::PostgresLockManagerBuilder::metrics_key_prefix)
//! only): a guard's backend wrapped so that its hold is counted under its
//! key's prefix while it lasts.
//!
//! - `eventsource_lock_prefix_held{key_prefix}`: guards held now;
//! - `eventsource_lock_prefix_hold_duration_seconds{key_prefix}`: from the
//!   grant to the guard's release or drop;
//! - `eventsource_lock_prefix_losses_total{key_prefix}`: guards that ended
//!   lost (counted when the guard ends, not when the session did), as
//!   `eventsource_lock_losses_total` counts them: a lock that `release_all`
//!   took away from its live guard was released on purpose, not lost.
//!
//! A guard turned into a manual lock (`into_manual`) leaves these metrics
//! there: its later `release(key)` is not seen here.

use std::sync::Arc;
use std::time::Instant;

use super::metrics::KeyPrefixes;
use crate::ports::alarm::Alarm;
use crate::ports::error::Result;
use crate::ports::locks::{BoxFuture, GuardBackend, LossSignal};

#[cfg(feature = "metrics")]
const HELD: &str = "eventsource_lock_prefix_held";
#[cfg(feature = "metrics")]
const HOLD_DURATION: &str = "eventsource_lock_prefix_hold_duration_seconds";
#[cfg(feature = "metrics")]
const LOSSES: &str = "eventsource_lock_prefix_losses_total";

/// Guards held now under one prefix, process-wide: the gauge is *set* to
/// it on every change (as `metrics_gauges.rs` does for the manager's
/// gauges), so a recorder installed while guards were held reads the
/// true count, never a change below 0.
#[derive(Default)]
struct HeldCount(std::sync::atomic::AtomicI64);

/// Describes the per-prefix metrics and registers `prefix`'s series at 0,
/// the first time this process sees the prefix (the labels are bounded by
/// each manager's limit, so the set is too); the prefix's count of holds.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
fn register(prefix: &str) -> Arc<HeldCount> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<String, Arc<HeldCount>>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(count) = seen.get(prefix) {
        return count.clone();
    }
    let count = Arc::new(HeldCount::default());
    seen.insert(prefix.to_owned(), count.clone());
    #[cfg(feature = "metrics")]
    {
        use metrics::Unit;
        metrics::describe_gauge!(HELD, Unit::Count, "Guards held now, by key prefix");
        metrics::describe_histogram!(
            HOLD_DURATION,
            Unit::Seconds,
            "Time from a grant to its guard's end, by key prefix"
        );
        metrics::describe_counter!(LOSSES, Unit::Count, "Guards that ended lost, by key prefix");
        metrics::gauge!(HELD, "key_prefix" => prefix.to_owned()).increment(0.0);
        metrics::counter!(LOSSES, "key_prefix" => prefix.to_owned()).increment(0);
    }
    count
}

impl HeldCount {
    /// The count changed by `delta`; the prefix's gauge set to it.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    fn change(&self, label: &str, delta: i64) {
        use std::sync::atomic::Ordering::SeqCst;
        self.0.fetch_add(delta, SeqCst);
        #[cfg(feature = "metrics")]
        super::metrics_gauges::publish(
            metrics::gauge!(HELD, "key_prefix" => label.to_owned()),
            &self.0,
        );
    }
}

/// `backend` as is without a key prefix; else counted under `key`'s.
/// `taken` is the lock's own alarm, raised when `release_all` takes it.
pub(super) fn wrap(
    prefixes: Option<&KeyPrefixes>,
    key: &str,
    loss: &LossSignal,
    taken: Option<Arc<Alarm>>,
    backend: Box<dyn GuardBackend>,
) -> Box<dyn GuardBackend> {
    match prefixes {
        None => backend,
        Some(p) => {
            let label = p.label(key);
            let count = register(&label);
            let loss = Loss {
                signal: loss.clone(),
                taken,
            };
            let hold = Hold { label, count, loss };
            Box::new(PrefixHold::begin(hold, Instant::now(), backend))
        }
    }
}

/// How a hold ended: lost (its session, its lease), or released on
/// purpose by `release_all` (not a loss).
#[derive(Clone)]
struct Loss {
    signal: LossSignal,
    taken: Option<Arc<Alarm>>,
}

impl Loss {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn lost(&self) -> bool {
        let released = self.taken.as_ref().is_some_and(|a| a.is_raised());
        self.signal.is_lost() && !released
    }
}

/// What a hold is counted under.
#[derive(Clone)]
struct Hold {
    label: String,
    count: Arc<HeldCount>,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    loss: Loss,
}

struct PrefixHold {
    hold: Hold,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    since: Instant,
    inner: Option<Box<dyn GuardBackend>>,
}

impl PrefixHold {
    fn begin(hold: Hold, since: Instant, inner: Box<dyn GuardBackend>) -> Self {
        hold.count.change(&hold.label, 1);
        Self {
            hold,
            since,
            inner: Some(inner),
        }
    }

    /// Ends the counted hold; the inner backend, if not taken yet.
    fn end(&mut self) -> Option<Box<dyn GuardBackend>> {
        let inner = self.inner.take()?;
        let label = &self.hold.label;
        self.hold.count.change(label, -1);
        #[cfg(feature = "metrics")]
        {
            metrics::histogram!(HOLD_DURATION, "key_prefix" => label.clone())
                .record(self.since.elapsed());
            if self.hold.loss.lost() {
                metrics::counter!(LOSSES, "key_prefix" => label.clone()).increment(1);
            }
        }
        Some(inner)
    }
}

impl Drop for PrefixHold {
    fn drop(&mut self) {
        drop(self.end());
    }
}

impl GuardBackend for PrefixHold {
    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        let inner = self.end().expect("a hold not yet ended");
        inner.release()
    }

    fn into_manual(mut self: Box<Self>) {
        let inner = self.end().expect("a hold not yet ended");
        inner.into_manual();
    }

    fn downgrade(mut self: Box<Self>) -> BoxFuture<'static, Result<Box<dyn GuardBackend>>> {
        // The hold goes on in the other mode: counted on, from the same grant.
        let inner = self.inner.take().expect("a hold not yet ended");
        let (hold, since) = (self.hold.clone(), self.since);
        hold.count.change(&hold.label, -1);
        Box::pin(async move {
            let shared = inner.downgrade().await?;
            let kept: Box<dyn GuardBackend> = Box::new(PrefixHold::begin(hold, since, shared));
            Ok(kept)
        })
    }
}
