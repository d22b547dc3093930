//! The election gauges, through the `metrics` facade (feature `metrics`),
//! labelled by the election's name (`election`):
//!
//! - `eventsource_election_is_leader`: 1 while this process leads, else 0;
//! - `eventsource_election_term`: the term this process leads with, or led
//!   with last;
//! - `eventsource_election_transitions_total`: how many times this process
//!   began or ended a term.
//!
//! Registered at 0 when an [`Election`](super::Election) is built, so a
//! dashboard shows 0 rather than nothing. Without the feature, nothing.

use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(feature = "metrics")]
const IS_LEADER: &str = "eventsource_election_is_leader";
#[cfg(feature = "metrics")]
const TERM: &str = "eventsource_election_term";
#[cfg(feature = "metrics")]
const TRANSITIONS: &str = "eventsource_election_transitions_total";

/// Describes the gauges and registers the election's series at 0 (the
/// values already there are kept).
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(super) fn register(election: &str) {
    #[cfg(feature = "metrics")]
    {
        use metrics::Unit;
        metrics::describe_gauge!(
            IS_LEADER,
            Unit::Count,
            "1 while this process leads the election"
        );
        metrics::describe_gauge!(
            TERM,
            Unit::Count,
            "The term this process leads (or last led) with"
        );
        metrics::describe_counter!(
            TRANSITIONS,
            Unit::Count,
            "Terms this process began or ended"
        );
        let label = election.to_owned();
        metrics::gauge!(IS_LEADER, "election" => label.clone()).increment(0.0);
        metrics::gauge!(TERM, "election" => label.clone()).increment(0.0);
        metrics::counter!(TRANSITIONS, "election" => label).increment(0);
    }
}

/// A term of this process in the gauges: begun when built, ended once (by
/// [`end`](Self::end) when the leadership is lost, or on drop).
#[derive(Debug)]
pub(super) struct TermGauge {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    election: String,
    ended: AtomicBool,
}

impl TermGauge {
    pub(super) fn begin(election: &str, term: u64) -> Self {
        #[cfg(feature = "metrics")]
        {
            let label = election.to_owned();
            metrics::gauge!(IS_LEADER, "election" => label.clone()).set(1.0);
            metrics::gauge!(TERM, "election" => label.clone()).set(term as f64);
            metrics::counter!(TRANSITIONS, "election" => label).increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = term;
        Self {
            election: election.to_owned(),
            ended: AtomicBool::new(false),
        }
    }

    /// The term ended (idempotent).
    pub(super) fn end(&self) {
        let first = !self.ended.swap(true, Ordering::AcqRel);
        #[cfg(feature = "metrics")]
        if first {
            let label = self.election.clone();
            metrics::gauge!(IS_LEADER, "election" => label.clone()).set(0.0);
            metrics::counter!(TRANSITIONS, "election" => label).increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = first;
    }
}

impl Drop for TermGauge {
    fn drop(&mut self) {
        self.end();
    }
}
