//! The lock manager's metrics, through the `metrics` facade (feature
//! `metrics`, on by default). The application installs a recorder (for
//! example `metrics-exporter-prometheus`); without one every call here is a
//! load of the global recorder and a no-op. Without the feature these
//! functions are empty.
//!
//! Names follow the Prometheus conventions (what dashboards and `promtool
//! check metrics` expect): snake case, `_total` on counters, the base unit
//! in the name (`_seconds`), with a description and unit registered for
//! each; `docs/observability.md` lists them with their labels. No label
//! carries a key (keys are unbounded) unless the manager opts in to a
//! bounded key prefix.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

pub(crate) use super::metrics_gauges::{held, WaitingTask};

/// What kind of call an acquisition was, as the `operation` label: every
/// call that waits (`acquire`, `acquire_shared`) is an `acquire`, every
/// try (`try_lock`, `try_lock_shared`, `try_lock_any`) a `try_lock`, with
/// or without key prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Acquire,
    TryLock,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Acquire => "acquire",
            Operation::TryLock => "try_lock",
        }
    }
}

/// How an acquisition ended, as the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Granted at once.
    Granted,
    /// Granted after waiting in the key's queue.
    GrantedAfterWait,
    /// A try found the key held elsewhere.
    Contended,
    /// The timeout ran out in the queue.
    Timeout,
    /// Anything else (database, budget, closed manager, a key too long).
    Error,
    /// The caller dropped the call's future before it ended.
    Abandoned,
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Granted | Outcome::GrantedAfterWait => "granted",
            Outcome::Contended => "contended",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::Abandoned => "abandoned",
        }
    }

    fn waited(self) -> &'static str {
        if self == Outcome::GrantedAfterWait {
            "true"
        } else {
            "false"
        }
    }
}

/// Why a session's locks were lost (the `cause` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LossCause {
    /// The connection ended or a statement on it failed.
    SessionEnded = 0,
    /// The liveness check got no answer in time.
    LivenessFailed = 1,
    /// Lease mode: the session was not confirmed within its lease.
    LeaseExpired = 2,
    /// The connection timed out: the server stopped acknowledging it (the
    /// client's `tcp_user_timeout` or keepalives gave up).
    TimedOut = 3,
}

impl LossCause {
    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => LossCause::LivenessFailed,
            2 => LossCause::LeaseExpired,
            3 => LossCause::TimedOut,
            _ => LossCause::SessionEnded,
        }
    }

    /// Why the locks of a session ended for this cause were lost, as their loss
    /// signals say it; `None` for an end whose reason is noted where it
    /// happens (the server's error, a failed connection) or unknown.
    pub(crate) fn loss_reason(self) -> Option<&'static str> {
        match self {
            LossCause::LivenessFailed => Some(
                "the server did not answer the liveness check of the session holding the lock in time",
            ),
            LossCause::LeaseExpired => {
                Some("the server did not confirm the session before its lease ran out")
            }
            LossCause::TimedOut => Some(
                "the connection of the session holding the lock timed out \
                 (the server stopped acknowledging it)",
            ),
            LossCause::SessionEnded => None,
        }
    }

    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn as_str(self) -> &'static str {
        match self {
            LossCause::SessionEnded => "session_ended",
            LossCause::LivenessFailed => "liveness_failed",
            LossCause::LeaseExpired => "lease_expired",
            LossCause::TimedOut => "timed_out",
        }
    }
}

/// The opt-in key attribute: the part of each key before `separator`,
/// for at most `limit` distinct prefixes (later ones are `other`).
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct KeyPrefixes {
    separator: char,
    limit: usize,
    seen: Mutex<HashSet<Box<str>>>,
}

impl std::fmt::Debug for KeyPrefixes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyPrefixes")
            .field("separator", &self.separator)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
impl KeyPrefixes {
    pub(crate) fn new(separator: char, limit: usize) -> Self {
        Self {
            separator,
            limit,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// The attribute value for `key`.
    pub(crate) fn label(&self, key: &str) -> String {
        let prefix = key.split(self.separator).next().unwrap_or_default();
        let mut cut = prefix.len().min(64);
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        let prefix = &prefix[..cut];
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(prefix) {
            return prefix.to_owned();
        }
        if seen.len() < self.limit {
            seen.insert(prefix.into());
            return prefix.to_owned();
        }
        "other".to_owned()
    }
}

#[cfg(feature = "metrics")]
mod names {
    pub(super) const ACQUISITIONS: &str = "eventsource_lock_acquisitions_total";
    pub(super) const ACQUIRE_DURATION: &str = "eventsource_lock_acquire_duration_seconds";
    pub(super) const HOLD_DURATION: &str = "eventsource_lock_hold_duration_seconds";
    pub(super) const LOSSES: &str = "eventsource_lock_losses_total";
    pub(super) use super::super::metrics_gauges::{HELD, SESSIONS, WAITING};
    pub(super) const BATCH_SIZE: &str = "eventsource_lock_batch_size";
}

/// Registers the descriptions (units included) with the recorder installed
/// now, and the series of static labels at 0, so that a dashboard shows 0
/// rather than nothing before the first event. Called when a manager is
/// built and whenever a lock session opens, so a recorder installed after
/// the manager was built gets them too; registering again changes no value
/// (a counter is incremented by 0; a gauge is set to its count, which it
/// already shows).
#[cfg(feature = "metrics")]
pub(crate) fn describe() {
    use metrics::Unit;
    metrics::describe_counter!(
        names::ACQUISITIONS,
        Unit::Count,
        "Lock acquisitions, by operation and outcome (granted, contended, timeout, error, abandoned)"
    );
    metrics::describe_histogram!(
        names::ACQUIRE_DURATION,
        Unit::Seconds,
        "Time from an acquisition's call to its outcome"
    );
    metrics::describe_histogram!(
        names::HOLD_DURATION,
        Unit::Seconds,
        "Time from a grant to its release (or the end of a lost lock's guard)"
    );
    metrics::describe_counter!(
        names::LOSSES,
        Unit::Count,
        "Locks lost while held, by cause"
    );
    metrics::describe_gauge!(names::HELD, Unit::Count, "Locks held now");
    metrics::describe_gauge!(
        names::WAITING,
        Unit::Count,
        "Tasks waiting for a contended key now"
    );
    metrics::describe_gauge!(names::SESSIONS, Unit::Count, "Open lock sessions, by kind");
    metrics::describe_histogram!(
        names::BATCH_SIZE,
        Unit::Count,
        "Try-locks and unlocks per batched-session statement"
    );
    for (op, outcome, waited) in [
        ("acquire", "granted", "false"),
        ("acquire", "granted", "true"),
        ("acquire", "contended", "false"),
        ("acquire", "timeout", "false"),
        ("acquire", "error", "false"),
        ("acquire", "abandoned", "false"),
        ("try_lock", "granted", "false"),
        ("try_lock", "contended", "false"),
        ("try_lock", "error", "false"),
    ] {
        metrics::counter!(names::ACQUISITIONS,
            "operation" => op, "outcome" => outcome, "waited" => waited)
        .increment(0);
    }
    for cause in [
        LossCause::SessionEnded,
        LossCause::LivenessFailed,
        LossCause::LeaseExpired,
        LossCause::TimedOut,
    ] {
        metrics::counter!(names::LOSSES, "cause" => cause.as_str()).increment(0);
    }
    super::metrics_gauges::publish_all();
}

#[cfg(not(feature = "metrics"))]
pub(crate) fn describe() {}

/// An acquisition ended.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn acquisition(
    operation: Operation,
    outcome: Outcome,
    elapsed: Duration,
    key: Option<(&KeyPrefixes, &str)>,
) {
    #[cfg(feature = "metrics")]
    {
        let Some((prefixes, key)) = key else {
            // Static labels: no allocation, whatever the recorder.
            macro_rules! emit {
                ($op:literal, $o:literal, $w:literal) => {{
                    let counter = metrics::counter!(names::ACQUISITIONS,
                        "operation" => $op, "outcome" => $o, "waited" => $w);
                    counter.increment(1);
                    metrics::histogram!(names::ACQUIRE_DURATION,
                        "operation" => $op, "outcome" => $o, "waited" => $w).record(elapsed);
                }};
            }
            macro_rules! per_outcome {
                ($op:literal) => {
                    match outcome {
                        Outcome::Granted => emit!($op, "granted", "false"),
                        Outcome::GrantedAfterWait => emit!($op, "granted", "true"),
                        Outcome::Contended => emit!($op, "contended", "false"),
                        Outcome::Timeout => emit!($op, "timeout", "false"),
                        Outcome::Error => emit!($op, "error", "false"),
                        Outcome::Abandoned => emit!($op, "abandoned", "false"),
                    }
                };
            }
            match operation {
                Operation::TryLock => per_outcome!("try_lock"),
                Operation::Acquire => per_outcome!("acquire"),
            }
            return;
        };
        let labels = [
            ("operation", operation.as_str().to_owned()),
            ("outcome", outcome.as_str().to_owned()),
            ("waited", outcome.waited().to_owned()),
            ("key_prefix", prefixes.label(key)),
        ];
        metrics::counter!(names::ACQUISITIONS, &labels).increment(1);
        metrics::histogram!(names::ACQUIRE_DURATION, &labels).record(elapsed);
    }
}

/// A session of `kind` (`batched` or `dedicated`) opened (`1`) or closed
/// (`-1`).
pub(crate) fn sessions(kind: &'static str, delta: i64) {
    if delta > 0 {
        describe(); // a recorder installed since the manager was built
    }
    super::metrics_gauges::sessions(kind, delta);
}

/// A held lock granted at `granted_at` ended (released, or its guard
/// dropped after a loss). Takes the grant's time rather than the duration:
/// without the feature, no clock is read.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn held_for(granted_at: std::time::Instant) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(names::HOLD_DURATION).record(granted_at.elapsed());
}

/// `n` held locks were lost with their session.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn lost(n: usize, cause: LossCause) {
    #[cfg(feature = "metrics")]
    if n > 0 {
        metrics::counter!(names::LOSSES, "cause" => cause.as_str()).increment(n as u64);
    }
}

/// A batched-session statement carried `n` items.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn batch(n: usize) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(names::BATCH_SIZE).record(n as f64);
}
