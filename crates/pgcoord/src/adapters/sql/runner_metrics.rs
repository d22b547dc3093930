//! The projection runner's metrics, through the `metrics` facade (feature
//! `metrics`), with the projection's name as the `projection`
//! attribute (names are few and chosen by the application). Without the
//! feature these functions are empty. `docs/observability.md` lists them.

#![cfg_attr(not(feature = "metrics"), allow(unused_variables))]

use std::time::Duration;

#[cfg(feature = "metrics")]
mod names {
    pub(super) const APPLIED: &str = "eventsource_projection_events_applied_total";
    pub(super) const BATCH_DURATION: &str = "eventsource_projection_batch_duration_seconds";
    pub(super) const LAG: &str = "eventsource_projection_lag";
    pub(super) const RETRIES: &str = "eventsource_projection_retries_total";
    pub(super) const PARKED: &str = "eventsource_projection_parked_events";
    pub(super) const PARKED_TOTAL: &str = "eventsource_projection_events_parked_total";
    pub(super) const PROJECTION: &str = "projection";
}

#[cfg(feature = "metrics")]
fn describe() {
    use metrics::Unit;
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        metrics::describe_counter!(names::APPLIED, "Events applied by a projection");
        metrics::describe_histogram!(
            names::BATCH_DURATION,
            Unit::Seconds,
            "Time to apply one batch of events with its checkpoint"
        );
        metrics::describe_gauge!(
            names::LAG,
            Unit::Count,
            "Events of the feed beyond the projection's checkpoint, when the feed knows its head"
        );
        metrics::describe_counter!(
            names::RETRIES,
            "Failures of a projection retried after a backoff"
        );
        metrics::describe_gauge!(
            names::PARKED,
            Unit::Count,
            "Events of a projection parked in the dead-letter table"
        );
        metrics::describe_counter!(
            names::PARKED_TOTAL,
            "Events a projection's runner parked in the dead-letter table"
        );
    });
}

/// A batch committed: `applied` events in `took`.
pub(crate) fn batch(projection: &str, applied: u64, took: Duration) {
    #[cfg(feature = "metrics")]
    {
        describe();
        let name = projection.to_owned();
        metrics::counter!(names::APPLIED, names::PROJECTION => name.clone()).increment(applied);
        metrics::histogram!(names::BATCH_DURATION, names::PROJECTION => name).record(took);
    }
}

/// The events beyond the checkpoint.
pub(crate) fn lag(projection: &str, events: i64) {
    #[cfg(feature = "metrics")]
    {
        describe();
        metrics::gauge!(names::LAG, names::PROJECTION => projection.to_owned()).set(events as f64);
    }
}

/// A transient failure about to be retried.
pub(crate) fn retried(projection: &str) {
    #[cfg(feature = "metrics")]
    {
        describe();
        metrics::counter!(names::RETRIES, names::PROJECTION => projection.to_owned()).increment(1);
    }
}

/// The events parked in the dead-letter table now.
pub(crate) fn parked(projection: &str, events: u64) {
    #[cfg(feature = "metrics")]
    {
        describe();
        metrics::gauge!(names::PARKED, names::PROJECTION => projection.to_owned())
            .set(events as f64);
    }
}

/// `events` more parked by the runner.
pub(crate) fn parked_now(projection: &str, events: u64) {
    #[cfg(feature = "metrics")]
    {
        describe();
        metrics::counter!(names::PARKED_TOTAL, names::PROJECTION => projection.to_owned())
            .increment(events);
    }
}
