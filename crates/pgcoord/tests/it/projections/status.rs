//! `projection_status`: checkpoint, head, lag, the runner holding the
//! lock; `eta_seconds`.

use pgcoord::readmodels::postgres::projection_status;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, reach, runner, setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_names_checkpoint_head_lag_and_runner() {
    let s = setup().await;
    let client = s.test_db.connect().await.unwrap();
    // Before anything ran: no checkpoint table yet, no runner.
    let before = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(
        (before.checkpoint, before.head, before.lag_events),
        (None, None, Some(0))
    );
    assert!(before.runner.is_none());
    assert_eq!(before.parked, 0, "no dead-letter table: none parked");

    append_committed(&s.db, &s.feed, 1, 10).await;
    let r = runner(&s.db, &s.feed, "seen");
    let stop = CancellationToken::new();
    let mut task = tokio::spawn({
        let (r, l, s) = (r.clone(), s.locks.clone(), stop.clone());
        async move { r.run(&l, &s).await }
    });
    reach(&r, &mut task, 10).await;
    let running = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(running.checkpoint, Some(10));
    assert_eq!(
        (running.head, running.lag_events, running.lag_seconds),
        (Some(10), Some(0), Some(0.0))
    );
    assert_eq!(running.eta_seconds(), Some(0.0));
    let runner_info = running.runner.expect("the runner holds the lock");
    assert_eq!(runner_info.holder_id.as_deref(), Some("runner-test"));
    assert!(runner_info.backend_pid > 0);
    assert!(running.checkpoint_updated_at.is_some());

    stop.cancel();
    task.await.unwrap().unwrap();
    append_committed(&s.db, &s.feed, 11, 15).await;
    let behind = projection_status(&client, "seen", Some("events"))
        .await
        .unwrap();
    assert_eq!(
        (behind.checkpoint, behind.head, behind.lag_events),
        (Some(10), Some(15), Some(5))
    );
    assert!(behind.lag_seconds.unwrap() >= 0.0);
    assert!(
        behind.runner.is_none(),
        "the stopped runner released its lock"
    );
    let json = serde_json::to_value(&behind).unwrap();
    assert_eq!(json["lag_events"], 5);
    assert_eq!(json["parked"], 0, "no dead-letter table: none parked");

    let err = projection_status(&client, "seen", Some("Bad-Name"))
        .await
        .unwrap_err();
    assert!(matches!(err, pgcoord::Error::InvalidArgument(_)), "{err}");
    let err = projection_status(&client, "seen", Some("no_such_table"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no event table"), "{err}");
}
