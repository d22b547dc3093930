//! Keys and labels that others control, as the tables show them: a long
//! key is shortened (one key must not push every column off the screen, or
//! pad every row to megabytes), invisible and bidirectional characters are
//! escaped in every view, `lock key` prints different keys differently,
//! and a fence-table label names only the lock whose key it is.

use pgcoord::lock_id_for_key;

use crate::common::*;
use crate::top::holding;

/// The widest a key is shown in a table (`SHOWN_KEY_WIDTH` of the tool).
const KEY_WIDTH: usize = 40;

async fn stdout_of(db: &pgcoord_testkit::pg::TestDatabase, args: &[&str]) -> String {
    let out = output(eventsource(Some(db)).args(args)).await;
    assert_eq!(out.code, 0, "{args:?}: {out:?}");
    out.stdout
}

/// `lock run --fence` on a 250-character key: `lock top` and `lock
/// holders` show it shortened, and the table fits a 150-column terminal;
/// a 2.4 MB key in the fence table no longer pads every row of `lock
/// holders` to its width.
#[tokio::test]
async fn a_long_key_is_shortened_in_the_tables() {
    let db = database().await;
    stdout_of(&db, &["lock", "install"]).await;
    let key = format!("tenant:{}", "x".repeat(250));
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--fence",
        "--holder-id",
        "long-key",
        &key,
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]));
    run.expect_line("ready").await;
    let shown = format!(
        "tenant:{}…",
        "x".repeat(KEY_WIDTH - "tenant:…".chars().count())
    );

    let top = stdout_of(&db, &["lock", "top"]).await;
    let header = top.lines().find(|l| l.starts_with("KEY ")).unwrap();
    assert!(header.contains("FENCE") && header.len() <= 150, "{top}");
    let row = top.lines().find(|l| l.contains("long-key")).unwrap();
    assert!(row.starts_with(&format!("{shown}  held")), "{top}");
    assert!(top.lines().all(|l| l.chars().count() <= 150), "{top}");

    let holders = stdout_of(&db, &["lock", "holders"]).await;
    let row = holders.lines().find(|l| l.contains("long-key")).unwrap();
    assert!(row.contains(&format!("  {shown}  ")), "{holders}");
    // JSON keeps the whole key.
    let json = stdout_of(&db, &["lock", "holders", "--json"]).await;
    assert!(json.contains(&key), "{json}");
    run.send_line("done").await;
    assert_eq!(run.finish().await.code, 0);

    // A key of 2.4 MB, as the fence table may record (its id is its key's).
    let huge = "k".repeat(2_400_000);
    let admin = db.connect().await.unwrap();
    admin
        .execute(
            "INSERT INTO eventsource_lock_fences (lock_id, key, fence) VALUES ($1, $2, 1)",
            &[&lock_id_for_key(&huge), &huge],
        )
        .await
        .unwrap();
    let holder = session(&db, "huge-key").await;
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key(&huge)])
        .await
        .unwrap();
    let holders = stdout_of(&db, &["lock", "holders"]).await;
    assert!(holders.len() < 2000, "{} bytes", holders.len());
    assert!(
        holders.contains(&format!("{}…", "k".repeat(KEY_WIDTH - 1))),
        "{holders}"
    );
}

/// A hand-written fence-table row labels lock 777 `migrate:prod`: that
/// label is not `migrate:prod`'s lock, so it names nothing.
#[tokio::test]
async fn a_fence_label_names_only_the_lock_of_its_key() {
    let db = database().await;
    stdout_of(&db, &["lock", "install"]).await;
    let admin = db.connect().await.unwrap();
    admin
        .batch_execute("INSERT INTO eventsource_lock_fences (lock_id, key, fence) VALUES (777, 'migrate:prod', 3)")
        .await
        .unwrap();
    let holder = session(&db, "forger").await;
    holder
        .execute("SELECT pg_advisory_lock(777)", &[])
        .await
        .unwrap();

    let holders = stdout_of(&db, &["lock", "holders"]).await;
    assert!(!holders.contains("migrate:prod"), "{holders}");
    assert!(
        holders
            .lines()
            .any(|l| l.starts_with("777  ") && l.contains("  -  ")),
        "{holders}"
    );
    let top = stdout_of(&db, &["lock", "top"]).await;
    assert!(!top.contains("migrate:prod"), "{top}");
    assert!(top.lines().any(|l| l.starts_with("777  ")), "{top}");
    let json = stdout_of(&db, &["lock", "holders", "--json"]).await;
    assert!(!json.contains("migrate:prod"), "{json}");
}

/// U+202E (right-to-left override), U+200B (zero width space) and U+2066
/// (left-to-right isolate) in a key or a name are escaped wherever it is
/// shown.
#[tokio::test]
async fn invisible_and_bidirectional_characters_are_escaped_everywhere() {
    let db = database().await;
    let key = "pay\u{202e}lla\u{200b}x\u{2066}";
    let shown = "pay\\u{202e}lla\\u{200b}x\\u{2066}";
    let raw = ['\u{202e}', '\u{200b}', '\u{2066}'];
    let mut run = holding(&db, "bidi", key).await;

    let holders = stdout_of(&db, &["lock", "holders", key]).await;
    assert!(!holders.contains(raw), "{holders:?}");
    assert!(holders.contains(&format!("  {shown}  held")), "{holders}");
    let top = stdout_of(&db, &["lock", "top", key]).await;
    assert!(!top.contains(raw), "{top:?}");
    assert!(
        top.lines()
            .any(|l| l.starts_with(&format!("{shown}  held"))),
        "{top}"
    );
    let line = stdout_of(&db, &["lock", "key", key]).await;
    assert_eq!(line, format!("{shown}\t{}\n", lock_id_for_key(key)));
    run.send_line("done").await;
    assert_eq!(run.finish().await.code, 0);

    stdout_of(&db, &["lock", "install"]).await;
    let leader = stdout_of(&db, &["leader", "show", key]).await;
    assert!(!leader.contains(raw), "{leader:?}");
    assert!(
        leader.starts_with(&format!("{shown}\tvacant\t")),
        "{leader}"
    );
}

/// A key with a backslash and an `n` and one with a newline used to print
/// alike (`a\nb`).
#[tokio::test]
async fn lock_key_prints_different_keys_differently() {
    let out = output(eventsource(None).args(["lock", "key", "a\\nb", "a\nb", "c\\d"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let keys: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(keys, ["a\\\\nb", "a\\nb", "c\\\\d"]);
}

/// PostgreSQL keeps an application_name to printable ASCII (`é` became
/// `?`): the holder id is percent-encoded there, and `lock holders` shows
/// it as given, with no warning from the run.
#[tokio::test]
async fn a_holder_id_outside_printable_ascii_is_shown_as_given() {
    let db = database().await;
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "worker-é-日本",
        "k",
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]));
    run.expect_line("ready").await;
    let json = stdout_of(&db, &["lock", "holders", "--json", "k"]).await;
    assert!(json.contains("\"worker-é-日本\""), "{json}");
    assert!(
        json.contains("\"eventsource/worker-%C3%A9-%E6%97%A5%E6%9C%AC\""),
        "{json}"
    );
    run.send_line("done").await;
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stderr.contains("printable ASCII"), "{}", out.stderr);
}
