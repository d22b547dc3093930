//! A segmented projection started with another segment count than its
//! checkpoints have is refused: its new segments would start from 0 and
//! apply every event again into the same read model.

use std::time::Duration;

use pgcoord::error::ReadModelError;
use pgcoord::readmodels::postgres::PostgresCheckpointWatch;
use pgcoord::readmodels::Segment;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, setup};
use super::segments::{key, manager, segmented, wait_all_applied, NAME};
use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_segment_count_is_refused_and_applies_nothing() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 40).await;
    let stop = CancellationToken::new();
    let four = segmented(&s.db, &s.feed, 4, 5, Duration::ZERO);
    let locks = manager(&s, "seg-four");
    {
        let run = four.run(&locks, &stop);
        tokio::pin!(run);
        tokio::select! {
            r = &mut run => panic!("the run ended by itself: {r:?}"),
            () = wait_all_applied(&s.db, 4, 40) => {}
        }
        stop.cancel();
        run.await.unwrap();
    }

    // Three segments now: refused before any event is applied again. The
    // watch of segment 0 of 3 reaching its last event is what the bug did.
    let three = segmented(&s.db, &s.feed, 3, 5, Duration::ZERO);
    let zero = Segment::new(0, 3).unwrap();
    let last = (1..=40).rev().find(|m| zero.holds(&key(&ev(*m)))).unwrap();
    let watch = PostgresCheckpointWatch::start(&s.db, &zero.projection_name(NAME));
    let stop = CancellationToken::new();
    let three_locks = manager(&s, "seg-three");
    let result = tokio::select! {
        r = three.run(&three_locks, &stop) => r,
        c = watch.wait_for(last, None) => panic!("three segments applied the events again: {c:?}"),
    };
    let e = result.expect_err("a changed segment count is refused");
    match &e {
        pgcoord::Error::ReadModel(ReadModelError::SegmentCountChanged { found, asked, .. }) => {
            assert_eq!((*found, *asked), (4, 3), "{e}");
        }
        other => panic!("not a segment count error: {other:?}"),
    }
    let text = e.to_string();
    for part in [
        "4 segment(s)",
        "seen/segment-0-of-4",
        "asked for 3",
        "rebuild",
    ] {
        assert!(text.contains(part), "{part:?} in: {text}");
    }
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, 40).await;
    let client = s.test_db.connect().await.unwrap();
    let of_three: i64 = client
        .query_one(
            "SELECT count(*) FROM eventsource_projection_checkpoints WHERE projection LIKE 'seen/segment-%-of-3'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(of_three, 0, "no checkpoint of three segments written");
}
