//! `projection status` and `projection dlq list` given the base name of a
//! segmented projection: each segment's line and a total, the segments'
//! parked events; and the runner's "last active", not "since".

use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

use crate::common::*;
use crate::projection::fill_behind;

/// Segments 0 and 1 of 2 of `segp`, checkpointed at 5 and 3, beside
/// `shop` at 3 (event table `events`, positions 1..=5).
const SEGMENTS: &str =
    "INSERT INTO eventsource_projection_checkpoints (projection, position) VALUES \
     ('segp/segment-0-of-2', 5), ('segp/segment-1-of-2', 3);";

async fn segmented() -> pgcoord_testkit::pg::TestDatabase {
    let db = database().await;
    fill_behind(&db).await;
    let client = db.connect().await.unwrap();
    client.batch_execute(SEGMENTS).await.unwrap();
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_a_segmented_base_name_shows_each_segment_and_a_total() {
    let db = segmented().await;
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("seg-a")
        .build()
        .unwrap();
    let _guard = locks
        .acquire("projection:segp/segment-0-of-2", None)
        .await
        .unwrap();
    let args = ["projection", "status", "--events-table", "events", "segp"];
    let out = output(eventsource(Some(&db)).args(args)).await;
    assert_eq!(out.code, 0, "{out:?}");
    let text = &out.stdout;
    assert!(!text.contains("none yet"), "{text}");
    assert!(text.contains("segmented"), "{text}");
    assert!(
        text.contains("segment-0-of-2")
            && text.contains("checkpoint 5, lag 0 events, runner seg-a"),
        "{text}"
    );
    assert!(
        text.contains("segment-1-of-2") && text.contains("checkpoint 3, lag 2 events, runner none"),
        "{text}"
    );
    assert!(text.contains("lag up to 2 events"), "{text}");
    assert!(
        text.contains("seg-a (1); 1 segment(s) held by none"),
        "{text}"
    );

    let args = [
        "projection",
        "status",
        "--json",
        "--events-table",
        "events",
        "segp",
    ];
    let out = output(eventsource(Some(&db)).args(args)).await;
    assert_eq!(out.code, 0, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["segments"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["segments"][1]["projection"], "segp/segment-1-of-2", "{v}");
    assert_eq!(v["lag_events_max"], 2, "{v}");
    assert_eq!(v["runners"]["seg-a"], 1, "{v}");
    assert_eq!(v["unheld_segments"], 1, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_list_of_a_segmented_base_name_lists_the_segments_parked_events() {
    let db = segmented().await;
    let client = db.connect().await.unwrap();
    client
        .batch_execute(
            r#"CREATE TABLE "eventsource_projection_dead_letters" ("projection" TEXT NOT NULL, "position" BIGINT NOT NULL, "partition_key" TEXT, "payload" JSONB, "error" TEXT NOT NULL, "attempts" INTEGER NOT NULL, "behind" BIGINT, "first_failure" TIMESTAMPTZ NOT NULL, "last_failure" TIMESTAMPTZ NOT NULL, "replay_requested" BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY ("projection", "position"));
               INSERT INTO "eventsource_projection_dead_letters" VALUES
                 ('segp/segment-1-of-2', 2, 'agg-1', NULL, 'poison two', 3, NULL, now(), now(), false),
                 ('segp/segment-0-of-2', 4, 'agg-0', NULL, 'poison four', 3, NULL, now(), now(), false);"#,
        )
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["projection", "dlq", "list", "segp"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let text = &out.stdout;
    assert!(!text.contains("has no parked events"), "{text}");
    for part in [
        "segp/segment-0-of-2:",
        "segp/segment-1-of-2:",
        "poison two",
        "poison four",
    ] {
        assert!(text.contains(part), "{part:?} in: {text}");
    }
    let zero = text.find("segment-0-of-2:").unwrap();
    let one = text.find("segment-1-of-2:").unwrap();
    assert!(
        zero < text.find("poison four").unwrap() && one < text.find("poison two").unwrap(),
        "{text}"
    );

    let out =
        output(eventsource(Some(&db)).args(["projection", "dlq", "list", "--json", "segp"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_line_says_last_active_not_since() {
    let db = segmented().await;
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("shop-runner")
        .build()
        .unwrap();
    let _guard = locks.acquire("projection:shop", None).await.unwrap();
    let out = output(eventsource(Some(&db)).args(["projection", "status", "shop"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(", last active 20"), "{}", out.stdout);
    assert!(!out.stdout.contains(", since "), "{}", out.stdout);
    let help = output(eventsource(None).args(["projection", "status", "--help"])).await;
    let words = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("when its session was last active"),
        "{words}"
    );
    assert!(!words.contains("and since when"), "{words}");
}
