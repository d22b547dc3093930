//! `projection status`: the checkpoint, the event table's head and the
//! lag, the runner holding the projection's lock; `--json`; bad input.

use pgcoord::DistributedLock;
use pgcoord::{
    readmodels::postgres::{PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};

use crate::common::*;

/// The projections' checkpoint table, as the runner makes it, with
/// projection `shop` checkpointed at 3.
pub(crate) const SHOP_AT_3: &str =
    "CREATE TABLE eventsource_projection_checkpoints (projection TEXT PRIMARY KEY, \
     position BIGINT NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now());
     INSERT INTO eventsource_projection_checkpoints (projection, position) VALUES ('shop', 3);";

/// A database with event table `events` (positions 1..=5) and projection
/// `shop` checkpointed at 3.
async fn behind() -> pgcoord_testkit::pg::TestDatabase {
    let db = database().await;
    fill_behind(&db).await;
    db
}

/// Event table `events` (positions 1..=5) and projection `shop`
/// checkpointed at 3, in `db`.
pub(crate) async fn fill_behind(db: &pgcoord_testkit::pg::TestDatabase) {
    let pool = PostgresDatabase::connect(&db.url()).await.unwrap();
    let feed = PostgresEventTable::<serde_json::Value>::new(pool.clone(), "events").unwrap();
    feed.create_table().await.unwrap();
    let client = pool.get().await.unwrap();
    for n in 1..=5 {
        feed.append(&*client, &serde_json::json!({ "n": n }))
            .await
            .unwrap();
    }
    client
        .batch_execute(crate::projection::SHOP_AT_3)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_checkpoint_head_lag_and_the_runner() {
    let db = behind().await;
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("shop-runner")
        .build()
        .unwrap();
    let guard = locks.acquire("projection:shop", None).await.unwrap();

    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--events-table",
        "events",
        "shop",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("checkpoint  3"), "{}", out.stdout);
    assert!(out.stdout.contains("head        5"), "{}", out.stdout);
    assert!(
        out.stdout.contains("lag         2 events"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("runner      shop-runner"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  parked      0\n"),
        "no dead-letter table: none parked: {}",
        out.stdout
    );

    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--json",
        "--events-table",
        "events",
        "shop",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(json["checkpoint"], 3);
    assert_eq!(json["head"], 5);
    assert_eq!(json["lag_events"], 2);
    assert_eq!(json["runner"]["holder_id"], "shop-runner");
    assert!(json["runner"]["backend_pid"].as_i64().unwrap() > 0);
    guard.release().await.unwrap();

    let out = output(eventsource(Some(&db)).args(["projection", "status", "--json", "shop"])).await;
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert!(json["runner"].is_null(), "released: {json}");
    assert!(json["lag_events"].is_null(), "no --events-table: no lag");
}

/// A checkpoint that moved in the last minute with no progress sample (a
/// runner that failed before taking one) has an unknown rate, not 0; one
/// that has not moved for an hour has rate 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_rate_is_unknown_when_the_checkpoint_moved_without_a_sample() {
    let db = behind().await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute(
            r#"CREATE TABLE "eventsource_projection_progress" ("projection" TEXT NOT NULL, "slot" INTEGER NOT NULL, "at" TIMESTAMPTZ NOT NULL, "position" BIGINT NOT NULL, PRIMARY KEY ("projection", "slot"))"#,
        )
        .await
        .unwrap();
    let status = |json: bool| {
        let mut cmd = eventsource(Some(&db));
        cmd.args(["projection", "status", "shop"]);
        if json {
            cmd.arg("--json");
        }
        async move { output(&mut cmd).await }
    };
    let out = status(false).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("  rate        unknown (too few recent samples)\n"),
        "{}",
        out.stdout
    );
    let json: serde_json::Value = serde_json::from_str(status(true).await.stdout.trim()).unwrap();
    assert!(json["events_per_second"].is_null(), "{json}");

    admin
        .batch_execute(
            "UPDATE eventsource_projection_checkpoints SET updated_at = now() - interval '1 hour'",
        )
        .await
        .unwrap();
    let out = status(false).await;
    assert!(
        out.stdout
            .contains("  rate        0.0 events/s over the last minute\n"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_refuses_a_bad_event_table_name_and_a_missing_event_table() {
    let db = behind().await;
    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--events-table",
        "Bad;Name",
        "shop",
    ]))
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("event table name"), "{}", out.stderr);
    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--events-table",
        "nope",
        "shop",
    ]))
    .await;
    assert_eq!(
        out.code, 78,
        "the database lacks the table the option names: {out:?}"
    );
    assert!(
        out.stderr.contains("no event table \"nope\""),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_database_and_role_when_the_checkpoints_are_not_visible() {
    let db = behind().await;
    let out = output(eventsource(Some(&db)).args(["projection", "status", "ghost"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stderr.contains("has no table"),
        "the table is there: {}",
        out.stderr
    );

    // The checkpoints in a schema of their own, which a second role
    // reaches through its search_path but may not use.
    let admin = db.connect().await.unwrap();
    let role = format!("blind_{}", db.name());
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA app; ALTER TABLE eventsource_projection_checkpoints SET SCHEMA app;
             CREATE ROLE {role} LOGIN; GRANT SELECT ON app.eventsource_projection_checkpoints TO {role};
             ALTER ROLE {role} SET search_path = app, public"
        ))
        .await
        .unwrap();
    let url = format!("postgres://{role}@{}", db.url().split_once('@').unwrap().1);
    let out = output(
        eventsource(None)
            .args(["projection", "status", "shop"])
            .env("DATABASE_URL", &url),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("checkpoint  none yet"),
        "{}",
        out.stdout
    );
    let note = format!(
        "note: database \"{}\" has no table eventsource_projection_checkpoints that role \"{role}\" can see",
        db.name()
    );
    assert!(out.stderr.contains(&note), "{}", out.stderr);

    admin
        .batch_execute(&format!("GRANT USAGE ON SCHEMA app TO {role}"))
        .await
        .unwrap();
    let out = output(
        eventsource(None)
            .args(["projection", "status", "shop"])
            .env("DATABASE_URL", &url),
    )
    .await;
    assert!(out.stdout.contains("checkpoint  3"), "{out:?}");
    assert!(!out.stderr.contains("note:"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_refuses_an_empty_name_and_every_without_watch_or_too_short() {
    let db = database().await;
    for args in [
        &["projection", "status", ""][..],
        &["projection", "status", "a\nb"],
        &["projection", "status", "--every", "1s", "shop"],
        &["projection", "status", "--watch", "--every", "0s", "shop"],
    ] {
        let out = output(eventsource(Some(&db)).args(args)).await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_an_unknown_projection_says_none_yet() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["projection", "status", "ghost"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("checkpoint  none yet"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("runner      none holds projection:ghost"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_of_a_misspelt_name_lists_the_projections_that_have_a_checkpoint() {
    let db = behind().await;
    let out = output(eventsource(Some(&db)).args(["projection", "status", "shpo"])).await;
    assert_eq!(out.code, 0, "none yet is an answer, as documented: {out:?}");
    assert!(out.stdout.contains("checkpoint  none yet"), "{out:?}");
    assert!(
        out.stderr.contains(
            "note: projection \"shpo\" has no checkpoint here (it never ran against this \
             database, or the name is misspelt); projections with one: \"shop\""
        ),
        "{}",
        out.stderr
    );
    // The projection itself gets no note.
    let out = output(eventsource(Some(&db)).args(["projection", "status", "shop"])).await;
    assert!(!out.stderr.contains("note:"), "{}", out.stderr);
}

/// `--watch` ends on SIGINT, SIGTERM and SIGHUP with exit 0, as `lock
/// holders --watch` and `leader show --watch` do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_prints_a_json_line_per_look_until_interrupted() {
    use nix::sys::signal::Signal;
    let db = behind().await;
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        let mut run = Running::start(eventsource(Some(&db)).args([
            "projection",
            "status",
            "--watch",
            "--every",
            "100ms",
            "--json",
            "--events-table",
            "events",
            "shop",
        ]));
        for _ in 0..2 {
            let line = run.next_line().await;
            let json: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                (json["checkpoint"].as_i64(), json["lag_events"].as_i64()),
                (Some(3), Some(2)),
                "{line}"
            );
        }
        run.signal(sig);
        let out = run.finish().await;
        assert_eq!(out.code, 0, "{sig}: {out:?}");
    }
}
