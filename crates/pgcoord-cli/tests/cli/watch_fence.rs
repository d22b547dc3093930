//! The fence token of a fenced holder in every view: `lock holders` (text
//! and JSON), `lock holders --watch` and `lock top`; no FENCE column once
//! the fence table is gone.

use nix::sys::signal::Signal;
use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::TestDatabase;

use crate::common::*;
use crate::watch::{get, parse, Watch};

#[tokio::test]
async fn the_fence_token_shows_in_holders_watch_and_top() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    let key = "fenced:invoice-run";
    let id = lock_id_for_key(key);
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    // Two fenced runs: the second holds the second token, and tells its
    // command so. Tokens carry the server's timeline (1 here) above 40 bits.
    let first = (1u64 << pgcoord::postgres::fencing::EPOCH_SHIFT) + 1;
    let (first, second) = (first.to_string(), (first + 1).to_string());
    for expected in [first.as_str(), second.as_str()] {
        let mut run = Running::start(eventsource(Some(&db)).args([
            "lock",
            "run",
            "--fence",
            "--holder-id",
            "fenced-holder",
            key,
            "--",
            "sh",
            "-c",
            "echo \"fence $EVENTSOURCE_LOCK_FENCE\"; read x",
        ]));
        run.expect_line(&format!("fence {expected}")).await;
        if expected == second {
            check_views(&db, key, id, &second).await;
        }
        run.send_line("").await;
        assert_eq!(run.finish().await.code, 0);
    }

    // Without the table, no FENCE column at all.
    admin
        .batch_execute("DROP TABLE eventsource_lock_fences CASCADE")
        .await
        .unwrap();
    let raw = session(&db, "unfenced").await;
    raw.execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "holders"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("FENCE"), "{}", out.stdout);
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json"])).await;
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(json[0].get("fence").is_none(), "{json}");
}

/// `lock holders` (text and JSON), `--watch` and `lock top` show token
/// `token` for `key`, named by the fencing table (no key is given).
async fn check_views(db: &TestDatabase, key: &str, id: i64, token: &str) {
    let out = output(eventsource(Some(db)).args(["lock", "holders", "--json"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json[0]["fence"].to_string(), token, "{json}");
    assert_eq!(json[0]["key"], key, "{json}");
    let out = output(eventsource(Some(db)).args(["lock", "holders"])).await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].contains(" FENCE "), "{}", out.stdout);
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells[..4],
        [id.to_string().as_str(), key, token, "held"],
        "{}",
        out.stdout
    );

    let mut watch = Watch::start(db, &[]);
    let (event, f) = parse(&watch.next().await);
    assert_eq!(event, "held");
    assert_eq!(get(&f, "fence"), Some(token));
    assert_eq!(get(&f, "key"), Some(key));
    let (code, _) = watch.stop(Signal::SIGTERM).await;
    assert_eq!(code, 0);

    let out = output(eventsource(Some(db)).args(["lock", "top"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("fence tokens from public.eventsource_lock_fences"),
        "{}",
        out.stdout
    );
    let header = out.stdout.lines().find(|l| l.starts_with("KEY")).unwrap();
    assert!(header.trim_end().ends_with("FENCE"), "{header}");
    let row = out
        .stdout
        .lines()
        .find(|l| l.contains("fenced-holder"))
        .unwrap();
    assert!(
        row.starts_with(key) && row.trim_end().ends_with(&format!(" {token}")),
        "{}",
        out.stdout
    );
}

/// The fencing table dropped under a running watch: its listing used to
/// fail for ever (42P01); it now lists on without the fence column.
#[tokio::test]
async fn the_watch_lists_on_after_the_fence_table_is_dropped() {
    let db = database().await;
    let admin = db.connect().await.unwrap();
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let first = session(&db, "drop-first").await;
    first
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key("drop:a")])
        .await
        .unwrap();
    let mut watch = Watch::start(&db, &["drop:a", "drop:b"]);
    let (event, _) = parse(&watch.next().await);
    assert_eq!(event, "held");
    admin
        .batch_execute("DROP TABLE eventsource_lock_fences CASCADE")
        .await
        .unwrap();
    let second = session(&db, "drop-second").await;
    second
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key("drop:b")])
        .await
        .unwrap();
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("acquired", Some("drop-second"))
    );
    let (code, stderr) = watch.stop(Signal::SIGTERM).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "no failed listing: {stderr}");
}
