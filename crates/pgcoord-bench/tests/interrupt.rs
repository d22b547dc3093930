//! The bench binary stopped by a signal, and run after a run that could
//! not clean up: what stays in the database.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use pgcoord_testkit::pg::{TestCluster, TestDatabase};

async fn database() -> TestDatabase {
    let cluster = tokio::task::spawn_blocking(TestCluster::start)
        .await
        .unwrap()
        .expect("private cluster");
    TestDatabase::create_on(Arc::new(cluster)).await.unwrap()
}

async fn exists(db: &TestDatabase, table: &str) -> bool {
    db.connect()
        .await
        .unwrap()
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_mid_run_drops_the_runs_table_and_exits_130() {
    let db = database().await;
    // One round whose window (10 minutes) is far longer than the test:
    // the table exists from before the window until the round ends.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pgcoord-bench"))
        .args([
            "--only",
            "write_fenced",
            "--rounds",
            "1",
            "--seconds",
            "600",
        ])
        .args(["--sweep-rounds", "0"])
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The table appears (no sign of it but the catalog: poll it).
    let mut tries = 0;
    while !exists(&db, "bench_fenced_write").await {
        tries += 1;
        assert!(tries < 3000, "bench_fenced_write never appeared");
        assert!(child.try_wait().unwrap().is_none(), "the bench ended early");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(text.contains("interrupted by SIGINT"), "{text}");
    assert!(!exists(&db, "bench_fenced_write").await, "{text}");
    // The fencing table is shared with real users: it stays.
    assert!(exists(&db, "eventsource_lock_fences").await, "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_run_drops_only_what_is_unmistakably_the_benchs() {
    let db = database().await;
    // No process has this pid (above any pid_max Linux allows).
    let dead = "bench_segment_events_1_1_999999999";
    let mine = format!("bench_segment_events_1_1_{}", std::process::id());
    db.connect()
        .await
        .unwrap()
        .batch_execute(&format!(
            "CREATE TABLE {dead} (position bigserial PRIMARY KEY); \
             CREATE TABLE {mine} (position bigserial PRIMARY KEY); \
             CREATE TABLE bench_fenced_write (id int PRIMARY KEY, v bigint); \
             CREATE TABLE bench_results (id int); \
             CREATE TABLE eventsource_projection_checkpoints (projection text PRIMARY KEY)"
        ))
        .await
        .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_pgcoord-bench"))
        .args(["--quick", "--only", "raw_seq", "--seconds", "0.2"])
        .args(["--sweep-rounds", "0"])
        .env("DATABASE_URL", db.url())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("dropped {dead}")), "{text}");
    assert!(!exists(&db, dead).await, "{text}");
    assert!(!exists(&db, "bench_fenced_write").await, "{text}");
    // A run that still runs (this test), and tables that are not the bench's, stay.
    assert!(exists(&db, &mine).await, "{text}");
    assert!(exists(&db, "bench_results").await, "{text}");
    assert!(
        exists(&db, "eventsource_projection_checkpoints").await,
        "{text}"
    );
}
