//! `projection status` during a catch-up and a rebuild: on a terminal the
//! bar with the ETA; the rebuilding version's checkpoint, lag, ETA and
//! runner in the report and in `--json`.

use std::process::Stdio;

use pgcoord::DistributedLock;
use pgcoord::{
    readmodels::postgres::{PostgresDatabase, PostgresEventTable},
    PostgresLockManager,
};
use tokio::process::Command;

use crate::common::*;

/// Event table `events` (1..=5), projection `shop` at 3, and with
/// `rebuilding`, version 2 of it building at 1.
async fn database_with(rebuilding: bool) -> pgcoord_testkit::pg::TestDatabase {
    let db = database().await;
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
    if rebuilding {
        client
            .batch_execute(
                r#"CREATE TABLE "eventsource_projection_versions" ("projection" TEXT PRIMARY KEY,
                   "current" INTEGER NOT NULL DEFAULT 1, "building" INTEGER,
                   "retired" INTEGER[] NOT NULL DEFAULT '{}', "updated_at" TIMESTAMPTZ NOT NULL DEFAULT now());
                 INSERT INTO eventsource_projection_versions (projection, building) VALUES ('shop', 2);
                 INSERT INTO eventsource_projection_checkpoints (projection, position) VALUES ('shop@v2', 1);"#,
            )
            .await
            .unwrap();
    }
    db
}

/// `eventsource projection status --events-table events shop` on a pty
/// (through `script`): all it wrote there.
async fn on_terminal(db: &pgcoord_testkit::pg::TestDatabase) -> String {
    let out = pty(
        db,
        &format!("{BIN} projection status --events-table events shop"),
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `command` on a pty (through `script`), to its end.
async fn pty(db: &pgcoord_testkit::pg::TestDatabase, command: &str) -> std::process::Output {
    let out = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(command)
        .arg("/dev/null")
        .env("DATABASE_URL", db.url())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(BOUND, out).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_on_a_terminal_draws_the_catch_up_bar() {
    let db = database_with(false).await;
    let seen = on_terminal(&db).await;
    assert!(
        seen.contains("catch-up [##################------------]  60% position 3 of 5, 2 events behind, eta unknown"),
        "{seen:?}"
    );
    assert!(!seen.contains("rebuild v"), "{seen:?}");
    // Not on a terminal: no bar.
    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--events-table",
        "events",
        "shop",
    ]))
    .await;
    assert!(!out.stderr.contains("catch-up ["), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_during_a_rebuild_shows_the_new_versions_lag_runner_and_bar() {
    let db = database_with(true).await;
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("shop-rebuild")
        .build()
        .unwrap();
    let guard = locks.acquire("projection:shop@v2", None).await.unwrap();

    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--events-table",
        "events",
        "shop",
    ]))
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    for want in [
        "  rebuild     version 2 building, checkpoint 1\n",
        "              4 events behind the head\n",
        "              runner shop-rebuild, server pid ",
    ] {
        assert!(out.stdout.contains(want), "{want:?} in {}", out.stdout);
    }

    let out = output(eventsource(Some(&db)).args([
        "projection",
        "status",
        "--json",
        "--events-table",
        "events",
        "shop",
    ]))
    .await;
    let json: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(json["rebuild"]["version"], 2);
    assert_eq!(json["rebuild"]["checkpoint"], 1);
    assert_eq!(json["rebuild"]["lag_events"], 4);
    assert_eq!(json["rebuild"]["runner"]["holder_id"], "shop-rebuild");
    assert_eq!(json["lag_events"], 2, "the live version's own");
    assert!(json["eta_seconds"].is_null(), "no rate yet: {json}");

    let seen = on_terminal(&db).await;
    assert!(
        seen.contains(
            "catch-up [##################------------]  60% position 3 of 5, 2 events behind"
        ),
        "{seen:?}"
    );
    assert!(
        seen.contains("rebuild v2 [######------------------------]  20% position 1 of 5, 4 events behind, eta unknown"),
        "{seen:?}"
    );
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_on_a_terminal_erases_the_bar_before_each_line() {
    let db = database_with(false).await;
    // Interrupted after a second: at least one look.
    let out = pty(
        &db,
        &format!("timeout -s INT 1 {BIN} projection status --watch --every 100ms --events-table events shop"),
    )
    .await;
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(
        seen.contains("\x1b[2Kcheckpoint=3 head=5 lag=2 "),
        "{seen:?}"
    );
    assert!(
        !seen.contains("eta unknown   checkpoint="),
        "a line glued to the bar: {seen:?}"
    );
    assert!(
        seen.contains("catch-up [##################------------]  60% position 3 of 5"),
        "{seen:?}"
    );
}
