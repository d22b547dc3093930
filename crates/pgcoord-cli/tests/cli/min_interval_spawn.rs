//! `lock run --min-interval` with a COMMAND that cannot be started at all
//! (not found: 127, not executable: 126): nothing ran, so its start is
//! taken back, and the next run, on a healthy host, is not skipped. A
//! COMMAND that started and failed still counts (`min_interval`).

use chrono::{DateTime, Utc};
use pgcoord_testkit::pg::TestDatabase;

use crate::common::*;

async fn install(db: &TestDatabase) {
    let out = output(eventsource(Some(db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
}

/// `lock run --min-interval 1h --no-wait KEY -- COMMAND...`.
async fn run(db: &TestDatabase, key: &str, command: &[&str]) -> Output {
    let mut cmd = eventsource(Some(db));
    cmd.args([
        "lock",
        "run",
        "--min-interval",
        "1h",
        "--no-wait",
        key,
        "--",
    ])
    .args(command);
    output(&mut cmd).await
}

/// Every key's recorded start: `None` for a row without one, no entry for
/// a key without a row.
async fn starts(client: &tokio_postgres::Client) -> Vec<(String, Option<DateTime<Utc>>)> {
    client
        .query(
            "SELECT key, last_run_started FROM eventsource_lock_fences ORDER BY key",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[tokio::test]
async fn a_command_that_cannot_be_started_does_not_use_up_the_interval() {
    let db = database().await;
    install(&db).await;
    let client = db.connect().await.unwrap();
    let dir = scratch_dir();
    let not_executable = dir.join("not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\necho must-not-run\n").unwrap();
    let not_executable = not_executable.to_str().unwrap();

    // No start recorded before: the record is removed again.
    let out = run(&db, "broken-host", &["/nonexistent/report.sh"]).await;
    assert_eq!(out.code, 127, "{out:?}");
    assert!(
        out.stderr
            .contains("was taken back, so it does not count for --min-interval"),
        "{}",
        out.stderr
    );
    let none = starts(&client).await;
    assert!(none.iter().all(|(_, at)| at.is_none()), "{none:?}");

    // A start recorded before (two hours ago, outside the interval): put
    // back as it was, to the microsecond, for every key of an --also set.
    client
        .execute(
            "UPDATE eventsource_lock_fences SET last_run_started = \
             date_trunc('second', now()) - interval '2 hours'",
            &[],
        )
        .await
        .unwrap();
    let before = starts(&client).await;
    let mut cmd = eventsource(Some(&db));
    cmd.args(["lock", "run", "--min-interval", "1h", "--no-wait"])
        .args(["--also", "partner", "broken-host", "--", not_executable]);
    let out = output(&mut cmd).await;
    assert_eq!(out.code, 126, "{out:?}");
    assert!(out.stderr.contains("taken back"), "{}", out.stderr);
    let after = starts(&client).await;
    let partner = after.iter().find(|(k, _)| k == "partner");
    assert_eq!(partner.map(|(_, at)| *at), Some(None), "{after:?}");
    let host = after.iter().find(|(k, _)| k == "broken-host");
    assert_eq!(host, before.iter().find(|(k, _)| k == "broken-host"));

    // The healthy host runs, and its start counts.
    let out = run(&db, "broken-host", &["echo", "ran"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "ran\n"), "{out:?}");
    let out = run(&db, "broken-host", &["echo", "ran"]).await;
    assert_eq!(out.code, 75, "{out:?}");
    assert!(out.stderr.contains("skipped"), "{}", out.stderr);
}

#[tokio::test]
async fn a_command_that_started_and_failed_still_counts() {
    let db = database().await;
    install(&db).await;
    let out = run(&db, "crashing", &["sh", "-c", "exit 127"]).await;
    assert_eq!(out.code, 127, "{out:?}");
    assert!(!out.stderr.contains("taken back"), "{}", out.stderr);
    let out = run(&db, "crashing", &["echo", "ran"]).await;
    assert_eq!(out.code, 75, "{out:?}");
}
