//! The runner's metrics, per projection, through a Prometheus recorder
//! local to this test's thread.

use pgcoord::readmodels::{InMemoryFeed, InMemoryReadModelRepository};
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::InMemoryLockManager;
use tokio_util::sync::CancellationToken;

use super::support::*;

#[test]
fn applied_events_and_batch_durations_are_counted_per_projection() {
    let text = crate::recorder::recorded(|| async {
        let feed = InMemoryFeed::new();
        for n in 1..=5 {
            feed.append(ev(n));
        }
        let projection =
            ReadModelProjection::new(Recorder::default(), InMemoryReadModelRepository::new())
                .named("metered");
        let runner = ProjectionRunner::new(projection, feed.clone())
            .batch_size(2)
            .idle_interval(None);
        let (locks, stop) = (InMemoryLockManager::new(None), CancellationToken::new());
        let progress = runner.progress();
        let run = runner.run(&locks, &stop);
        let watch = async {
            progress.wait_for(5, None).await.unwrap();
            stop.cancel();
        };
        let (summary, ()) = tokio::join!(run, watch);
        assert_eq!(summary.unwrap().batches, 3);
    });
    assert!(
        text.contains(r#"eventsource_projection_events_applied_total{projection="metered"} 5"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"eventsource_projection_batch_duration_seconds_count{projection="metered"} 3"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"eventsource_projection_lag{projection="metered"} 0"#),
        "{text}"
    );
}

/// The value of the sample line starting with `series` (name and labels).
#[cfg(feature = "postgres")]
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[cfg(feature = "postgres")]
#[test]
fn retries_and_parked_events_are_counted_per_projection() {
    use pgcoord::readmodels::{DeadLetterPolicy, RetryPolicy};
    use std::time::Duration;

    let text = crate::recorder::recorded(|| async {
        let s = super::postgres::setup().await;
        super::postgres::append_committed(&s.db, &s.feed, 1, 6).await;
        let projection = ReadModelProjection::new(Picky::poisoned(&[3]), s.db.repository::<Seen>())
            .named("metered")
            .with_retry(RetryPolicy {
                max_attempts: 2,
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(1),
                multiplier: 1.0,
            });
        let runner = ProjectionRunner::new(projection, s.feed.clone())
            .batch_size(4)
            .idle_interval(None)
            .with_dead_letters(DeadLetterPolicy::new());
        let stop = CancellationToken::new();
        let progress = runner.progress();
        let run = runner.run(&s.locks, &stop);
        let watch = async {
            progress.wait_for(6, None).await.unwrap();
            stop.cancel();
        };
        let (summary, ()) = tokio::join!(run, watch);
        assert_eq!(summary.unwrap().applied, 5);
    });
    let of = |name: &str| sample(&text, &format!(r#"{name}{{projection="metered"}}"#));
    assert_eq!(
        of("eventsource_projection_events_parked_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        of("eventsource_projection_parked_events"),
        Some(1.0),
        "{text}"
    );
    assert!(
        of("eventsource_projection_retries_total").is_some_and(|r| r >= 1.0),
        "{text}"
    );
    assert_eq!(
        of("eventsource_projection_events_applied_total"),
        Some(5.0),
        "{text}"
    );
}
