//! `lock holders` with a key held in shared mode by two sessions
//! (`pg_advisory_lock_shared`, plain SQL) and an exclusive waiter behind
//! them: each session's mode and the number of shared holders, in text, in
//! JSON and in `--watch` events.

use nix::sys::signal::Signal;
use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::TestDatabase;
use tokio_postgres::Client;

use crate::common::*;

const KEY: &str = "report:shared";

/// Two sessions holding KEY shared, one queued for it exclusively (kept
/// alive by the returned clients and task).
async fn shared_holds(
    db: &TestDatabase,
    inspector: &Client,
) -> (Client, Client, tokio::task::JoinHandle<Client>) {
    let id = lock_id_for_key(KEY);
    let mut readers = Vec::new();
    for app in ["eventsource/reader-1", "eventsource/reader-2"] {
        let reader = session(db, app).await;
        reader
            .execute("SELECT pg_advisory_lock_shared($1)", &[&id])
            .await
            .unwrap();
        readers.push(reader);
    }
    let writer = session(db, "eventsource/writer").await;
    let waiting = tokio::spawn(async move {
        writer
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        writer
    });
    wait_for(inspector, KEY, "the exclusive waiter", |l| {
        l.is_some_and(|l| l.holders.len() == 2 && l.waiters.len() == 1)
    })
    .await;
    let second = readers.pop().unwrap();
    (readers.pop().unwrap(), second, waiting)
}

#[tokio::test]
async fn shared_holders_in_text_and_json() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let _holds = shared_holds(&db, &inspector).await;

    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json", KEY])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    let lock = &json[0];
    assert_eq!(lock["key"], KEY);
    assert_eq!(lock["shared_holders"], 2, "{lock}");
    for holder in lock["holders"].as_array().unwrap() {
        assert_eq!(holder["shared"], true, "{holder}");
        assert_eq!(holder["mode"], "ShareLock", "{holder}");
    }
    assert_eq!(lock["waiters"][0]["shared"], false);
    assert_eq!(lock["waiters"][0]["holder_id"], "writer");

    let out = output(eventsource(Some(&db)).args(["lock", "holders", KEY])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(lines[4].starts_with(">=: "), "{}", out.stdout);
    for line in &lines[1..3] {
        assert!(
            line.contains(" held ") && line.contains("shared (2 holders)"),
            "{}",
            out.stdout
        );
    }
    for holder in ["reader-1", "reader-2"] {
        assert!(
            lines[1..3].iter().any(|l| l.contains(holder)),
            "{}",
            out.stdout
        );
    }
    assert!(
        lines[3].contains("waiting")
            && lines[3].contains("exclusive")
            && lines[3].contains("writer"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn watch_events_carry_the_mode_and_the_shared_count() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let _holds = shared_holds(&db, &inspector).await;

    let mut json = Running::start(eventsource(Some(&db)).args([
        "lock",
        "holders",
        "--watch",
        "--json",
        "--interval",
        "100ms",
        KEY,
    ]));
    let mut events = Vec::new();
    for _ in 0..3 {
        let line = json.next_line().await;
        events.push(serde_json::from_str::<serde_json::Value>(&line).expect("a JSON line"));
    }
    let holds: Vec<_> = events.iter().filter(|e| e["event"] == "held").collect();
    assert_eq!(holds.len(), 2, "{events:?}");
    for e in holds {
        assert_eq!(
            (&e["shared"], &e["shared_holders"]),
            (&true.into(), &2.into()),
            "{e}"
        );
    }
    let wait = events.iter().find(|e| e["event"] == "waiting").unwrap();
    assert_eq!(wait["shared"], false, "{wait}");
    assert!(wait.get("shared_holders").is_none(), "{wait}");
    json.signal(Signal::SIGTERM);
    assert_eq!(json.finish().await.code, 0);

    let mut text = Running::start(eventsource(Some(&db)).args(["lock", "holders", "--watch", KEY]));
    let mut lines = Vec::new();
    for _ in 0..3 {
        lines.push(text.next_line().await);
    }
    let held: Vec<_> = lines.iter().filter(|l| l.contains(" held ")).collect();
    assert_eq!(held.len(), 2, "{lines:?}");
    assert!(
        held.iter()
            .all(|l| l.contains(" mode=shared shared_holders=2")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" waiting ") && l.contains(" mode=exclusive")),
        "{lines:?}"
    );
    text.signal(Signal::SIGTERM);
    assert_eq!(text.finish().await.code, 0);
}
