//! The runner's metrics, per projection, through a Prometheus recorder
//! local to this test's thread.

use pgcoord::readmodels::{InMemoryFeed, InMemoryReadModelRepository};
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection};
use pgcoord::InMemoryLockManager;
use tokio_util::sync::CancellationToken;

use super::support::*;

#[test]
fn applied_events_and_batch_durations_are_counted_per_projection() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
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
    });
    let text = handle.render();
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
