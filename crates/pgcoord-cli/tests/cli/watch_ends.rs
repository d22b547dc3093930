//! How `lock holders --watch` and `leader show --watch` end, and what they
//! say on the way: a signal the tool was started with ignored stays
//! ignored; a reader that went away ends a quiet watch (no change needed
//! to notice it); a session the server ended is said once on stderr.

use nix::sys::signal::Signal;
use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::TestDatabase;

use crate::common::*;

/// Whether `/proc/PID/status` shows `sig` ignored.
fn ignores(pid: i32, sig: Signal) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .expect("a SigIgn line");
    let bits = u64::from_str_radix(mask.trim(), 16).expect("a hex mask");
    bits & (1 << (sig as u32 - 1)) != 0
}

/// A plain session holding `key`'s lock, named `app`.
async fn hold(db: &TestDatabase, app: &str, key: &str) -> tokio_postgres::Client {
    let client = session(db, app).await;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&lock_id_for_key(key)])
        .await
        .unwrap();
    client
}

const WATCH: [&str; 5] = ["lock", "holders", "--watch", "--interval", "100ms"];

#[tokio::test]
async fn signals_started_ignored_stay_ignored_by_the_watch() {
    let db = database().await;
    let _first = hold(&db, "ign-first", "ign:a").await;
    // SIGHUP ignored by nohup, SIGINT by the shell's trap, as for `cmd &`
    // in a script: both inherited across exec.
    let mut watch = Running::start(
        eventsource_under(
            &["nohup", "sh", "-c", "trap '' INT; exec \"$0\" \"$@\""],
            Some(&db),
        )
        .args(WATCH)
        .args(["ign:a", "ign:b"]),
    );
    assert!(watch
        .next_line()
        .await
        .starts_with(|c: char| c.is_ascii_digit()));
    let pid = watch.pid().as_raw();
    assert!(ignores(pid, Signal::SIGHUP), "SIGHUP still ignored");
    assert!(ignores(pid, Signal::SIGINT), "SIGINT still ignored");
    watch.signal(Signal::SIGHUP);
    watch.signal(Signal::SIGINT);
    let _second = hold(&db, "ign-second", "ign:b").await;
    let line = watch.next_line().await;
    assert!(
        line.contains(" acquired ") && line.contains("app=ign-second"),
        "{line}"
    );
    watch.signal(Signal::SIGTERM);
    let out = watch.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
}

/// Starts `args`, reads its first line, then closes the reading end of
/// its stdout while nothing changes: it must end on its own, exit 0,
/// without a word.
async fn ends_when_its_reader_leaves(db: &TestDatabase, args: &[&str]) {
    let mut child = eventsource(Some(db)).args(args).spawn().unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let first = tokio::time::timeout(BOUND, lines.next_line())
        .await
        .expect("a first line in time")
        .unwrap();
    assert!(first.is_some(), "a first line");
    drop(lines);
    let out = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("the watch ends without a change to write")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit_code(out.status), 0, "{stderr}");
    assert!(stderr.is_empty(), "no message: {stderr}");
}

#[tokio::test]
async fn a_quiet_holders_watch_ends_when_its_reader_leaves() {
    let db = database().await;
    let _held = hold(&db, "quiet-holder", "quiet:a").await;
    ends_when_its_reader_leaves(&db, &[&WATCH[..], &["quiet:a"]].concat()).await;
}

#[tokio::test]
async fn a_quiet_leader_watch_ends_when_its_reader_leaves() {
    let db = database().await;
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    ends_when_its_reader_leaves(
        &db,
        &["leader", "show", "--watch", "--every", "100ms", "quiet"],
    )
    .await;
}

/// Ends every backend named `app`.
async fn terminate_app(db: &TestDatabase, app: &str) {
    let admin = db.connect().await.unwrap();
    let n: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid, 30000)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0);
    assert!(n >= 1, "found the watch's backend");
}

#[tokio::test]
async fn a_holders_watch_says_that_its_session_ended() {
    let db = database().await;
    let _first = hold(&db, "end-first", "end:a").await;
    let mut watch = Running::start(
        eventsource(Some(&db))
            .env("PGAPPNAME", "holders-watch-ended")
            .args(WATCH)
            .args(["end:a", "end:b"]),
    );
    assert!(watch.next_line().await.contains(" held "));
    terminate_app(&db, "holders-watch-ended").await;
    let said = watch.expect_stderr("ended").await;
    assert!(said.contains("session"), "{said}");
    // And it goes on, on a new session.
    let _second = hold(&db, "end-second", "end:b").await;
    let line = watch.next_line().await;
    assert!(line.contains("app=end-second"), "{line}");
    watch.signal(Signal::SIGTERM);
    let out = watch.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
}

#[tokio::test]
async fn a_leader_watch_says_that_its_session_ended() {
    let db = database().await;
    let install = output(eventsource(Some(&db)).args(["lock", "install"])).await;
    assert_eq!(install.code, 0, "{install:?}");
    let mut watch = Running::start(
        eventsource(Some(&db))
            .env("PGAPPNAME", "leader-watch-ended")
            .args(["leader", "show", "--watch", "--every", "100ms", "ended"]),
    );
    assert!(watch.next_line().await.contains("vacant"));
    terminate_app(&db, "leader-watch-ended").await;
    let said = watch.expect_stderr("session ended").await;
    assert!(said.contains("\"ended\""), "{said}");
    watch.expect_stderr("again").await;
    watch.signal(Signal::SIGTERM);
    assert_eq!(watch.finish().await.code, 0);
}

/// `projection status --watch` writes a line per look, so a reader that
/// left is noticed at the next one; but during an outage it writes nothing
/// (the failure is said once on stderr), and a reader that left then must
/// end it all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projection_watch_in_an_outage_ends_when_its_reader_leaves() {
    use pgcoord_testkit::pg::StopMode;
    use tokio::io::AsyncBufReadExt;

    // A cluster of its own: the test stops it.
    let (cluster, db) = private_db(&[]).await;
    crate::projection::fill_behind(&db).await;
    let mut child = eventsource(Some(&db))
        .args([
            "projection",
            "status",
            "--watch",
            "--every",
            "100ms",
            "--events-table",
            "events",
            "shop",
        ])
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut errors = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(BOUND, lines.next_line())
        .await
        .expect("a first line in time")
        .unwrap();
    assert!(first.is_some(), "a first line");
    let stopping = cluster.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Fast))
        .await
        .unwrap()
        .expect("stop");
    // The outage is said once; from then on nothing is written.
    loop {
        let line = tokio::time::timeout(BOUND, errors.next_line())
            .await
            .expect("the outage said in time")
            .unwrap()
            .expect("a line on stderr before the end");
        if line.contains("trying again every") {
            break;
        }
    }
    drop(lines);
    let status = tokio::time::timeout(BOUND, child.wait())
        .await
        .expect("the watch ends without a line to write")
        .unwrap();
    assert_eq!(exit_code(status), 0);
}
