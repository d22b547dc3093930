//! The lock manager's gauges (`eventsource_lock_held`, `_waiting`,
//! `_sessions`), kept as process-wide counts and *set* to their absolute
//! value on every change, never incremented: a recorder installed after
//! the manager was used sees the true values, not the changes since it
//! came (which went below 0 when locks taken before it were released
//! after). Without the `metrics` feature nothing is counted.

#[cfg(feature = "metrics")]
use std::sync::atomic::{AtomicI64, Ordering};

#[cfg(feature = "metrics")]
mod counts {
    use std::sync::atomic::AtomicI64;
    pub(super) static HELD: AtomicI64 = AtomicI64::new(0);
    pub(super) static WAITING: AtomicI64 = AtomicI64::new(0);
    pub(super) static BATCHED: AtomicI64 = AtomicI64::new(0);
    pub(super) static DEDICATED: AtomicI64 = AtomicI64::new(0);
}

#[cfg(feature = "metrics")]
pub(super) const HELD: &str = "eventsource_lock_held";
#[cfg(feature = "metrics")]
pub(super) const WAITING: &str = "eventsource_lock_waiting";
#[cfg(feature = "metrics")]
pub(super) const SESSIONS: &str = "eventsource_lock_sessions";

/// Sets `gauge` to `count` until the value set is the one counted: when
/// two changes race, the one that set an older value sees the newer count
/// and sets it again, so the last value set is never a stale one.
#[cfg(feature = "metrics")]
pub(super) fn publish(gauge: metrics::Gauge, count: &AtomicI64) {
    loop {
        let v = count.load(Ordering::SeqCst);
        gauge.set(v as f64);
        if count.load(Ordering::SeqCst) == v {
            return;
        }
    }
}

#[cfg(feature = "metrics")]
fn change(gauge: metrics::Gauge, count: &AtomicI64, delta: i64) {
    count.fetch_add(delta, Ordering::SeqCst);
    publish(gauge, count);
}

#[cfg(feature = "metrics")]
fn session_gauge(kind: &'static str) -> (metrics::Gauge, &'static AtomicI64) {
    let count = if kind == "batched" {
        &counts::BATCHED
    } else {
        &counts::DEDICATED
    };
    (metrics::gauge!(SESSIONS, "kind" => kind), count)
}

/// Sets every gauge to its count (for a recorder that may be new).
#[cfg(feature = "metrics")]
pub(super) fn publish_all() {
    publish(metrics::gauge!(HELD), &counts::HELD);
    publish(metrics::gauge!(WAITING), &counts::WAITING);
    for kind in ["batched", "dedicated"] {
        let (gauge, count) = session_gauge(kind);
        publish(gauge, count);
    }
}

/// The number of held locks changed by `delta`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn held(delta: i64) {
    #[cfg(feature = "metrics")]
    change(metrics::gauge!(HELD), &counts::HELD, delta);
}

/// The number of waiting tasks changed by `delta`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
fn waiting(delta: i64) {
    #[cfg(feature = "metrics")]
    change(metrics::gauge!(WAITING), &counts::WAITING, delta);
}

/// A session of `kind` (`batched` or `dedicated`) opened (`1`) or closed (`-1`).
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(super) fn sessions(kind: &'static str, delta: i64) {
    #[cfg(feature = "metrics")]
    {
        let (gauge, count) = session_gauge(kind);
        change(gauge, count, delta);
    }
}

/// Counts one waiting task in `eventsource_lock_waiting` while it lives.
pub(crate) struct WaitingTask(());

impl WaitingTask {
    pub(crate) fn start() -> Self {
        waiting(1);
        Self(())
    }
}

impl Drop for WaitingTask {
    fn drop(&mut self) {
        waiting(-1);
    }
}
