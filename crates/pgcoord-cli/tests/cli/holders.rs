//! `lock holders`: text and JSON, with a holder and a queued waiter.

use pgcoord::lock_id_for_key;

use crate::common::*;

#[tokio::test]
async fn holders_in_text_and_json() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let id = lock_id_for_key("report:nightly");
    let holder = session(&db, "eventsource/cron-host:77").await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&id])
        .await
        .unwrap();
    let waiter = session(&db, "psql").await;
    let waiting = tokio::spawn(async move {
        waiter
            .execute("SELECT pg_advisory_lock($1)", &[&id])
            .await
            .unwrap();
        waiter
    });
    wait_for(&inspector, "report:nightly", "the waiter", |l| {
        l.is_some_and(|l| l.waiters.len() == 1)
    })
    .await;

    // JSON for the named key.
    let out =
        output(eventsource(Some(&db)).args(["lock", "holders", "--json", "report:nightly"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("valid JSON");
    let locks = json.as_array().expect("an array");
    assert_eq!(locks.len(), 1, "{json}");
    let lock = &locks[0];
    assert_eq!(lock["lock_id"], serde_json::json!(id));
    assert_eq!(lock["key"], "report:nightly");
    assert_eq!(lock["holders"][0]["holder_id"], "cron-host:77");
    assert_eq!(
        lock["holders"][0]["application_name"],
        "eventsource/cron-host:77"
    );
    assert_eq!(lock["holders"][0]["mode"], "ExclusiveLock");
    assert_eq!(lock["holders"][0]["shared"], false);
    assert!(lock.get("shared_holders").is_none(), "{lock}");
    assert_eq!(lock["holders"][0]["granted"], true);
    assert_eq!(lock["holders"][0]["client_addr"], "127.0.0.1");
    assert!(lock["holders"][0]["pid"].is_i64());
    assert!(lock["holders"][0]["since"].is_string());
    assert_eq!(lock["waiters"].as_array().unwrap().len(), 1);
    assert_eq!(lock["waiters"][0]["application_name"], "psql");
    assert_eq!(lock["waiters"][0]["holder_id"], serde_json::Value::Null);
    assert!(lock["waiters"][0]["since"].is_string());

    // Text for the named key and one nobody holds.
    let out =
        output(eventsource(Some(&db)).args(["lock", "holders", "report:nightly", "idle-key"]))
            .await;
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(
        lines[0].starts_with("LOCK ID") && lines[0].contains("HOLDER"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(&id.to_string())
            && lines[1].contains("report:nightly")
            && lines[1].contains(" held ")
            && lines[1].contains("cron-host:77")
            && lines[1].contains("127.0.0.1"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains("waiting") && lines[2].contains("\"psql\""),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with(">=: a holder's lock was granted"),
        "{}",
        lines[3]
    );
    assert_eq!(
        lines[4],
        format!(
            "idle-key (id {}): not held, no one waiting",
            lock_id_for_key("idle-key")
        )
    );

    // Without keys: every lock, the key unknown.
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json"])).await;
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let listed = json
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock_id"] == serde_json::json!(id))
        .expect("listed");
    assert_eq!(listed["key"], serde_json::Value::Null);

    holder
        .execute("SELECT pg_advisory_unlock($1)", &[&id])
        .await
        .unwrap();
    let waiter = waiting.await.unwrap();
    waiter
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "holders"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "no advisory locks are held or awaited in this database\n"
    );
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json"])).await;
    assert_eq!(out.stdout.trim(), "[]");
}

#[tokio::test]
async fn a_lock_run_holder_shows_with_its_default_holder_id() {
    let db = database().await;
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "visible",
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]));
    run.expect_line("ready").await;
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json", "visible"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    // PostgreSQL keeps 63 bytes of application_name ("eventsource/" + id).
    let mut expected = format!("{host}:{}", run.pid());
    expected.truncate(63 - "eventsource/".len());
    assert_eq!(json[0]["holders"][0]["holder_id"], expected);
    assert_eq!(json[0]["waiters"].as_array().unwrap().len(), 0);
    run.send_line("").await;
    assert_eq!(run.finish().await.code, 0);
}

/// A `lock run` holder's session runs a liveness statement twice a second,
/// so its last activity always reads "just now": SINCE (and JSON
/// `granted_not_before`) bound the grant by the session's start instead.
#[tokio::test]
async fn a_holders_since_is_its_session_start_marked_as_a_bound() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "bounded",
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]));
    run.expect_line("ready").await;
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json", "bounded"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let holder = &json[0]["holders"][0];
    let pid = holder["pid"].as_i64().unwrap() as i32;
    let row = inspector
        .query_one(
            "SELECT (extract(epoch FROM backend_start) * 1000000)::bigint \
             FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .unwrap();
    let started = chrono::DateTime::from_timestamp_micros(row.get(0)).unwrap();
    let bound: chrono::DateTime<chrono::Utc> = holder["granted_not_before"]
        .as_str()
        .unwrap_or_else(|| panic!("{holder}"))
        .parse()
        .unwrap();
    assert_eq!(bound, started, "{holder}");
    assert!(holder["since"].is_string(), "{holder}");

    let out = output(eventsource(Some(&db)).args(["lock", "holders", "bounded"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let stamp = started.format(">=%Y-%m-%dT%H:%M:%SZ (<=").to_string();
    let line = out.stdout.lines().nth(1).unwrap();
    assert!(
        line.contains(" held ") && line.contains(&stamp),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("\n>=: a holder's lock was granted at or after"),
        "{}",
        out.stdout
    );
    run.send_line("").await;
    assert_eq!(run.finish().await.code, 0);
}

#[tokio::test]
async fn a_two_int_lock_is_listed_apart() {
    let db = database().await;
    let holder = session(&db, "pair-app").await;
    holder
        .execute("SELECT pg_advisory_lock(7, -3)", &[])
        .await
        .unwrap();
    let out = output(eventsource(Some(&db)).args(["lock", "holders"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains("no advisory locks"), "{}", out.stdout);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("(7,-3)"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(row.contains("held") && row.contains("pair-app"), "{row}");
    assert!(
        out.stdout.contains("two-int advisory lock"),
        "{}",
        out.stdout
    );
    let out = output(eventsource(Some(&db)).args(["lock", "holders", "--json"])).await;
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json[0]["int_pair"], serde_json::json!([7, -3]), "{json}");
}
