//! `lock run KEY --also KEY2 ...`: the set is held as a whole (exclusion
//! across runs with overlapping sets, no deadlock between {a,b} and {b,a}),
//! taken all or none, lost as soon as one key is lost, and named to COMMAND
//! in its environment.

use pgcoord::inspect::{query_holders, AdvisoryLock};
use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::TestDatabase;
use tokio_postgres::Client;

use crate::common::*;

/// `keys` sorted by lock id: the order `acquire_many` takes them in.
fn by_id<'a>(keys: &[&'a str]) -> Vec<&'a str> {
    let mut sorted = keys.to_vec();
    sorted.sort_by_key(|k| lock_id_for_key(k));
    sorted
}

/// Polls the locks of `keys` until `pred` holds for them (no event says
/// "someone started waiting"), bounded by [`BOUND`].
async fn until_locks(
    client: &Client,
    keys: &[&str],
    what: &str,
    pred: impl Fn(&[AdvisoryLock]) -> bool,
) -> Vec<AdvisoryLock> {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let locks = query_holders(client, keys).await.expect("query_holders");
        if pred(&locks) {
            return locks;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw {what}: {locks:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn waiters(locks: &[AdvisoryLock]) -> usize {
    locks.iter().map(|l| l.waiters.len()).sum()
}

/// Whether `holder` waits for one of `locks` (a run that just ended may
/// still show a wait of its own for a moment: the server has not yet seen
/// its session close).
fn waits(locks: &[AdvisoryLock], holder: &str) -> bool {
    locks.iter().any(|l| {
        l.waiters
            .iter()
            .any(|w| w.holder_id.as_deref() == Some(holder))
    })
}

/// The keys of `locks` that `holder` holds.
fn held_by<'a>(locks: &'a [AdvisoryLock], holder: &str) -> Vec<&'a str> {
    locks
        .iter()
        .filter(|l| {
            l.holders
                .iter()
                .any(|h| h.holder_id.as_deref() == Some(holder))
        })
        .filter_map(|l| l.key.as_deref())
        .collect()
}

/// The backend pid that holds `key`.
fn holder_pid(locks: &[AdvisoryLock], key: &str) -> i32 {
    let lock = locks.iter().find(|l| l.key.as_deref() == Some(key));
    lock.and_then(|l| l.holders.first())
        .unwrap_or_else(|| panic!("{key} is held: {locks:?}"))
        .pid
}

/// A plain SQL session holding `keys` exclusively.
async fn sql_holder(db: &TestDatabase, app: &str, keys: &[&str]) -> Client {
    let client = session(db, app).await;
    for key in keys {
        client
            .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key(key)])
            .await
            .unwrap();
    }
    client
}

#[tokio::test]
async fn a_set_excludes_an_overlapping_set_until_it_is_released() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let log = log.display();
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "set-a",
        "ov-1",
        "--also",
        "ov-2",
        "--",
        "sh",
        "-c",
        &format!("echo A-in >> {log}; echo entered; read x; echo A-out >> {log}"),
    ]));
    a.expect_line("entered").await;
    let keys = ["ov-1", "ov-2", "ov-3"];
    let locks = query_holders(&inspector, &keys).await.unwrap();
    assert_eq!(by_id(&held_by(&locks, "set-a")), by_id(&["ov-1", "ov-2"]));

    // {ov-3, ov-2} overlaps in ov-2: it waits for A's whole run.
    let b = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "set-b",
        "ov-3",
        "--also",
        "ov-2",
        "--",
        "sh",
        "-c",
        &format!("echo B-in >> {log}; echo B-out >> {log}"),
    ]));
    until_locks(&inspector, &keys, "B waiting", |l| waiters(l) == 1).await;
    a.send_line("go").await;
    let a_out = a.finish().await;
    assert_eq!(a_out.code, 0, "{a_out:?}");
    let b_out = b.finish().await;
    assert_eq!(b_out.code, 0, "{b_out:?}");
    let text = std::fs::read_to_string(scratch.join("log")).unwrap();
    assert_eq!(text, "A-in\nA-out\nB-in\nB-out\n");
    assert!(query_holders(&inspector, &keys).await.unwrap().is_empty());
}

#[tokio::test]
async fn sets_named_in_opposite_orders_both_finish() {
    // Both runs wait while a third session holds both keys; then both are
    // freed at once. Taken in the order given, each run would get its first
    // key and wait for the other's: a deadlock. Taken in lock-id order,
    // both queue for the same key first.
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let log = log.display();
    let keys = ["dl-a", "dl-b"];
    let blocker = sql_holder(&db, "blocker", &keys).await;
    let run = |holder: &str, first: &str, second: &str| {
        Running::start(eventsource(Some(&db)).args([
            "lock",
            "run",
            "--holder-id",
            holder,
            first,
            "--also",
            second,
            "--",
            "sh",
            "-c",
            &format!("echo {holder}-in >> {log}; echo {holder}-out >> {log}"),
        ]))
    };
    let ab = run("ab", "dl-a", "dl-b");
    let ba = run("ba", "dl-b", "dl-a");
    let locks = until_locks(&inspector, &keys, "both runs waiting", |l| waiters(l) == 2).await;
    // While they wait, neither holds anything: both queue for the first key.
    let first = by_id(&keys)[0];
    let queued = locks.iter().find(|l| l.key.as_deref() == Some(first));
    assert_eq!(queued.map(|l| l.waiters.len()), Some(2), "{locks:?}");
    blocker
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();

    let ab_out = ab.finish().await;
    let ba_out = ba.finish().await;
    assert_eq!((ab_out.code, ba_out.code), (0, 0), "{ab_out:?} {ba_out:?}");
    let text = std::fs::read_to_string(scratch.join("log")).unwrap();
    assert!(
        text == "ab-in\nab-out\nba-in\nba-out\n" || text == "ba-in\nba-out\nab-in\nab-out\n",
        "one after the other: {text:?}"
    );
}

#[tokio::test]
async fn a_set_is_taken_all_or_none() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let scratch = scratch_dir();
    let marker = scratch.join("ran");
    let touch = format!("touch {}", marker.display());
    let keys = by_id(&["aon-1", "aon-2", "aon-3"]);
    // The middle key (by lock id) is held elsewhere.
    let holder = sql_holder(&db, "eventsource/other-host:9", &[keys[1]]).await;

    let out = output(
        eventsource(Some(&db))
            .args(["lock", "run", "--no-wait", keys[2], "--also", keys[1]])
            .args(["--also", keys[0], "--", "sh", "-c", &touch]),
    )
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "one line: {:?}", out.stderr);
    let id = lock_id_for_key(keys[1]).to_string();
    for needle in [
        keys[1],
        &id,
        "other-host:9",
        "all or none",
        keys[0],
        keys[2],
    ] {
        assert!(out.stderr.contains(needle), "{needle}: {}", out.stderr);
    }
    assert!(!marker.exists(), "the command must not run");

    // --timeout is one deadline for the set, named in the conflict line.
    let out = output(
        eventsource(Some(&db))
            .args([
                "lock",
                "run",
                "--timeout",
                "200ms",
                keys[0],
                "--also",
                keys[1],
            ])
            .args(["--", "sh", "-c", &touch]),
    )
    .await;
    assert_eq!(out.code, 75, "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "lock {:?} (id {id}) not acquired: still held elsewhere after 200ms",
            keys[1]
        )),
        "{}",
        out.stderr
    );
    assert!(!marker.exists(), "the command must not run");

    // Waiting for the middle key, a run holds only the key below it: it
    // gave back the one above it, and the command has not run.
    let mut waiting = Running::start(
        eventsource(Some(&db))
            .args([
                "lock",
                "run",
                "--holder-id",
                "aon-waiter",
                "--timeout",
                "1h",
            ])
            .args([keys[0], "--also", keys[1], "--also", keys[2]])
            .args(["--", "sh", "-c", &touch]),
    );
    let locks = until_locks(&inspector, &keys, "the waiter", |l| waits(l, "aon-waiter")).await;
    assert_eq!(held_by(&locks, "aon-waiter"), [keys[0]], "{locks:?}");
    waiting.signal(nix::sys::signal::Signal::SIGTERM);
    waiting
        .expect_stderr("SIGTERM while waiting for locks")
        .await;
    let out = waiting.finish().await;
    assert_eq!(out.code, 128 + 15, "{out:?}");
    assert!(!marker.exists(), "the command must not run");

    // Once the key is free, the whole set is taken.
    drop(holder);
    let out = output(
        eventsource(Some(&db))
            .args(["lock", "run", "--timeout", "1m", keys[0], "--also", keys[1]])
            .args(["--also", keys[2], "--", "sh", "-c"])
            .arg("echo \"$EVENTSOURCE_LOCK_KEYS\""),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    let held: Vec<String> = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(held, keys);
}

#[tokio::test]
async fn losing_one_key_of_the_set_stops_the_job_with_76() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let keys = ["lose-a", "lose-b"];
    // lose-b is held elsewhere first, so the run waits for it and then
    // holds it on a session of its own: terminating that session loses
    // lose-b alone.
    let blocker = sql_holder(&db, "blocker", &["lose-b"]).await;
    let mut run = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "loser",
        "lose-a",
        "--also",
        "lose-b",
        "--",
        "bash",
        "-c",
        "trap 'echo got-TERM; exit 0' TERM; echo ready; read y; echo not-stopped",
    ]));
    until_locks(&inspector, &keys, "the run waiting", |l| waiters(l) == 1).await;
    blocker
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    run.expect_line("ready").await;
    let locks = query_holders(&inspector, &keys).await.unwrap();
    assert_eq!(by_id(&held_by(&locks, "loser")), by_id(&keys));
    let (a, b) = (holder_pid(&locks, "lose-a"), holder_pid(&locks, "lose-b"));
    assert_ne!(a, b, "the keys are on two sessions: {locks:?}");
    let terminated: bool = inspector
        .query_one("SELECT pg_terminate_backend($1, 30000)", &[&b])
        .await
        .unwrap()
        .get(0);
    assert!(terminated);

    run.expect_line("got-TERM").await;
    let out = run.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(
        out.stderr
            .contains("lock \"lose-b\" (one of locks \"lose-a\" and \"lose-b\") was lost"),
        "{}",
        out.stderr
    );
    assert!(query_holders(&inspector, &keys).await.unwrap().is_empty());
}

#[tokio::test]
async fn command_sees_every_key_id_and_fence() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    let odd = "env \"b\"\n2";
    let print = "printf '%s\\n' \"$EVENTSOURCE_LOCK_KEY\" \"$EVENTSOURCE_LOCK_ID\" \
                 \"$EVENTSOURCE_LOCK_IDS\" \"${EVENTSOURCE_LOCK_FENCE-unset}\" \
                 \"${EVENTSOURCE_LOCK_FENCES-unset}\" \"$EVENTSOURCE_LOCK_KEYS\"";
    let run = |fence: bool| {
        let mut cmd = eventsource(Some(&db));
        cmd.args(["lock", "run"]);
        if fence {
            cmd.arg("--fence");
        }
        cmd.args(["env-a", "--also", odd, "--also", "env-a", "--", "sh", "-c"])
            .arg(print);
        cmd
    };
    let out = output(&mut run(true)).await;
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let sorted = by_id(&["env-a", odd]);
    let ids: Vec<String> = sorted
        .iter()
        .map(|k| lock_id_for_key(k).to_string())
        .collect();
    assert_eq!(lines[0], "env-a");
    assert_eq!(lines[1], lock_id_for_key("env-a").to_string());
    assert_eq!(lines[2], ids.join(" "), "{out:?}");
    let fences: std::collections::HashMap<String, u64> = serde_json::from_str(lines[4]).unwrap();
    assert_eq!(fences.len(), 2, "{fences:?}");
    assert!(fences[odd] >= 1);
    assert_eq!(lines[3], fences["env-a"].to_string());
    // The key with a newline spreads the JSON array over no extra line:
    // JSON escapes it.
    let keys: Vec<String> = serde_json::from_str(lines[5]).unwrap();
    assert_eq!(keys, sorted);
    assert_eq!(lines.len(), 6, "{out:?}");

    let out = output(&mut run(false)).await;
    assert_eq!(out.code, 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(&lines[3..5], ["unset", "unset"], "{out:?}");
}

#[tokio::test]
async fn also_does_not_combine_with_permits() {
    let db = database().await;
    let out = output(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--permits",
        "2",
        "k",
        "--also",
        "j",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("--also") && out.stderr.contains("--permits"),
        "{}",
        out.stderr
    );
}
