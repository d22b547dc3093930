//! `lock holders --watch`: the event lines of a hand-over in order, as text
//! and as JSON lines; a clean end on SIGINT / SIGTERM and on a closed
//! stdout; a server restart reported once and the watch going on. The
//! fence token in every view: `watch_fence`; a silent server and a silent
//! first host: `watch_silence`.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord::lock_id_for_key;
use pgcoord_testkit::pg::TestDatabase;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::common::*;

/// A running watch, its stdout read line by line, its stderr collected.
pub(crate) struct Watch {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    errors: tokio::sync::mpsc::UnboundedReceiver<String>,
    stderr: tokio::task::JoinHandle<String>,
}

impl Watch {
    pub(crate) fn start(db: &TestDatabase, args: &[&str]) -> Self {
        let mut child = eventsource(Some(db))
            .args(["lock", "holders", "--watch", "--interval", "100ms"])
            .args(args)
            .spawn()
            .expect("eventsource starts");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, errors) = tokio::sync::mpsc::unbounded_channel();
        let stderr = tokio::spawn(async move {
            let mut all = String::new();
            while let Ok(Some(line)) = err.next_line().await {
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
            all
        });
        Self {
            child,
            lines,
            errors,
            stderr,
        }
    }

    pub(crate) async fn next(&mut self) -> String {
        tokio::time::timeout(BOUND, self.lines.next_line())
            .await
            .expect("an event line in time")
            .expect("read stdout")
            .expect("stdout still open")
    }

    async fn next_error(&mut self) -> String {
        tokio::time::timeout(BOUND, self.errors.recv())
            .await
            .expect("a stderr line in time")
            .expect("stderr still open")
    }

    /// Ends it with `sig`; the exit code and the whole of stderr.
    pub(crate) async fn stop(mut self, sig: Signal) -> (i32, String) {
        kill(Pid::from_raw(self.child.id().unwrap() as i32), sig).unwrap();
        let status = tokio::time::timeout(BOUND, self.child.wait())
            .await
            .expect("the watch exits")
            .unwrap();
        let stderr = tokio::time::timeout(BOUND, self.stderr)
            .await
            .expect("stderr closes")
            .unwrap();
        (exit_code(status), stderr)
    }
}

/// `lock run --holder-id ID KEY`, holding (once granted) until a line on stdin.
fn lock_run(db: &TestDatabase, id: &str, key: &str) -> Running {
    Running::start(eventsource(Some(db)).args([
        "lock",
        "run",
        "--holder-id",
        id,
        key,
        "--",
        "sh",
        "-c",
        "echo ready; read x",
    ]))
}

async fn pid_of(inspector: &tokio_postgres::Client, key: &str, holder: &str) -> i32 {
    let lock = wait_for(inspector, key, holder, |l| {
        l.is_some_and(|l| {
            l.holders
                .iter()
                .chain(&l.waiters)
                .any(|s| s.holder_id.as_deref() == Some(holder))
        })
    })
    .await
    .unwrap();
    lock.holders
        .iter()
        .chain(&lock.waiters)
        .find(|s| s.holder_id.as_deref() == Some(holder))
        .unwrap()
        .pid
}

/// The event word and the fields of a text line.
pub(crate) fn parse(line: &str) -> (String, Vec<(String, String)>) {
    let mut words = line.split(' ');
    let time = words.next().unwrap();
    assert!(
        time.ends_with('Z') && time.contains('T'),
        "a time first: {line}"
    );
    let event = words.next().unwrap().to_owned();
    let fields = words
        .map(|w| {
            let (k, v) = w
                .split_once('=')
                .unwrap_or_else(|| panic!("name=value: {line}"));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (event, fields)
}

pub(crate) fn get<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn a_hand_over_is_held_waiting_released_granted_released_acquired() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let key = "watch:deploy";
    let id = lock_id_for_key(key).to_string();
    let mut first = lock_run(&db, "w-first", key);
    first.expect_line("ready").await;
    let first_pid = pid_of(&inspector, key, "w-first").await.to_string();
    let mut watch = Watch::start(&db, &[key]);

    let (event, f) = parse(&watch.next().await);
    assert_eq!(event, "held", "{f:?}");
    assert_eq!(get(&f, "key"), Some(key));
    assert_eq!(get(&f, "id"), Some(id.as_str()));
    assert_eq!(get(&f, "pid"), Some(first_pid.as_str()));
    assert_eq!(get(&f, "holder"), Some("w-first"));
    assert_eq!(get(&f, "client"), Some("127.0.0.1"));
    assert_eq!(get(&f, "mode"), Some("exclusive"));

    let mut second = lock_run(&db, "w-second", key);
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "holder")),
        ("waiting", Some("w-second"))
    );
    assert_eq!(get(&f, "blocked_by"), Some(first_pid.as_str()));

    first.send_line("").await;
    assert_eq!(first.finish().await.code, 0);
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "holder")),
        ("released", Some("w-first"))
    );
    assert_eq!(get(&f, "held"), None, "held before the watch began");
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "holder")),
        ("granted", Some("w-second"))
    );
    assert!(get(&f, "waited").is_some(), "{f:?}");
    second.expect_line("ready").await;

    second.send_line("").await;
    assert_eq!(second.finish().await.code, 0);
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "holder")),
        ("released", Some("w-second"))
    );
    assert!(get(&f, "held").is_some(), "the grant was seen: {f:?}");

    let mut third = lock_run(&db, "w-third", key);
    third.expect_line("ready").await;
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "holder")),
        ("acquired", Some("w-third"))
    );
    third.send_line("").await;
    assert_eq!(third.finish().await.code, 0);
    let (event, _) = parse(&watch.next().await);
    assert_eq!(event, "released");

    let (code, stderr) = watch.stop(Signal::SIGTERM).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[tokio::test]
async fn json_lines_parse_and_a_waiter_that_gives_up_is_abandoned() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let key = "watch:json";
    let mut holder = lock_run(&db, "j-holder", key);
    holder.expect_line("ready").await;
    let mut watch = Watch::start(&db, &["--json", key]);
    let next = |line: String| -> serde_json::Value {
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    let held = next(watch.next().await);
    assert_eq!(held["event"], "held", "{held}");
    assert_eq!(held["key"], key);
    assert_eq!(held["lock_id"], serde_json::json!(lock_id_for_key(key)));
    assert_eq!(held["holder_id"], "j-holder");
    assert_eq!(held["granted"], true);
    assert!(held["time"].as_str().unwrap().ends_with('Z'), "{held}");
    // As in `lock holders --json`: the grant's lower bound, for a holder.
    assert!(held["granted_not_before"].is_string(), "{held}");

    // A waiter that is interrupted: it stops waiting, unserved.
    let waiter = lock_run(&db, "j-waiter", key);
    let waiting = next(watch.next().await);
    assert_eq!(
        (&waiting["event"], &waiting["holder_id"]),
        (&"waiting".into(), &"j-waiter".into()),
        "{waiting}"
    );
    assert_eq!(waiting["granted"], false);
    assert!(waiting.get("granted_not_before").is_none(), "{waiting}");
    let holder_pid = pid_of(&inspector, key, "j-holder").await;
    assert_eq!(waiting["blocked_by"], serde_json::json!([holder_pid]));
    waiter.signal(Signal::SIGTERM);
    assert_eq!(waiter.finish().await.code, 143, "interrupted while waiting");
    let gave_up = next(watch.next().await);
    assert_eq!(gave_up["event"], "abandoned", "{gave_up}");
    assert!(
        gave_up["waited_seconds"].as_f64().unwrap() > 0.0,
        "{gave_up}"
    );

    holder.send_line("").await;
    assert_eq!(holder.finish().await.code, 0);
    let released = next(watch.next().await);
    assert_eq!(
        (&released["event"], &released["holder_id"]),
        (&"released".into(), &"j-holder".into()),
        "{released}"
    );
    let (code, stderr) = watch.stop(Signal::SIGINT).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[tokio::test]
async fn a_server_restart_is_reported_once_and_the_watch_goes_on() {
    use pgcoord_testkit::pg::StopMode;
    let (cluster, db) = private_db(&[]).await;
    let before = session(&db, "before-restart").await;
    before
        .execute("SELECT pg_advisory_lock(31)", &[])
        .await
        .unwrap();
    let mut watch = Watch::start(&db, &[]);
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("held", Some("before-restart"))
    );

    let stopping = cluster.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Fast))
        .await
        .unwrap()
        .unwrap();
    let error = watch.next_error().await;
    assert!(
        error.starts_with("eventsource: cannot list lock holders: ")
            && error.ends_with("; trying again every 100ms"),
        "{error}"
    );
    let starting = cluster.clone();
    tokio::task::spawn_blocking(move || starting.start_again())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        watch.next_error().await,
        "eventsource: listing lock holders again",
        "one line for the whole outage"
    );
    // The restart ended the holder's session, and with it its lock.
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("released", Some("before-restart"))
    );
    let after = session(&db, "after-restart").await;
    after
        .execute("SELECT pg_advisory_lock(32)", &[])
        .await
        .unwrap();
    let (event, f) = parse(&watch.next().await);
    assert_eq!(
        (event.as_str(), get(&f, "app")),
        ("acquired", Some("after-restart"))
    );
    let (code, stderr) = watch.stop(Signal::SIGHUP).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
}

#[tokio::test]
async fn a_closed_stdout_ends_the_watch_quietly() {
    let db = database().await;
    let mut child = eventsource(Some(&db))
        .args(["lock", "holders", "--watch", "--interval", "100ms"])
        .spawn()
        .unwrap();
    // The reader goes away before there is anything to say.
    drop(child.stdout.take());
    let holder = session(&db, "epipe-holder").await;
    holder
        .execute("SELECT pg_advisory_lock(77)", &[])
        .await
        .unwrap();
    let out = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("the watch ends at its first write")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(exit_code(out.status), 0, "{stderr}");
    assert!(stderr.is_empty(), "no panic, no message: {stderr}");
}
