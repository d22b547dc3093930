//! A multi-process checker of reader-writer locks, in the manner of
//! `coordination_checker.rs`: worker OS processes (this test binary, run as
//! a child), each with one manager and several tasks, read (shared) and
//! write (exclusive) two keys at random for a bounded time, give up some
//! waits on purpose, and append every critical section to a shared log.
//! The parent then checks, per key:
//!
//! - no writer's section overlaps any other section (reader or writer);
//! - readers did share (several at once), so the check is not trivial;
//! - every wait with a long timeout was granted: writers behind streams of
//!   readers are served, nobody starves;
//! - after a given-up wait, its manager holds nothing of it.
//!
//! `EVENTSOURCE_STRESS=1` runs longer with more workers.

use crate::checker_support;
use crate::common;
use crate::fault_support;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use checker_support::{now_ns, stress, Rng};
use fault_support::*;
use pgcoord::PostgresLockManager;
use pgcoord::{DistributedLock, LockRegistry, SharedLock};

const KEYS: u64 = 2;
const TASKS: u64 = 4;

fn append(file: &std::sync::Mutex<std::fs::File>, line: String) {
    file.lock().unwrap().write_all(line.as_bytes()).unwrap();
}

/// One worker process: `TASKS` tasks on one manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn rw_worker() {
    let url =
        std::env::var("ES_RW_URL").expect("ES_RW_URL: a worker, started by the tests in this file");
    let var = |n: &str| std::env::var(n).unwrap();
    let (worker, log) = (var("ES_RW_WORKER"), var("ES_RW_LOG"));
    let until: u128 = var("ES_RW_UNTIL_NS").parse().unwrap();
    let file = std::sync::Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
    ));
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("rw-{worker}"))
        .build()
        .unwrap();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let (m, file, name) = (m.clone(), file.clone(), format!("{worker}.{t}"));
        handles.push(tokio::spawn(async move {
            let seed = 0x9E37_79B9_7F4A_7C15 ^ ((std::process::id() as u64) << 8 | t) << 1 | 1;
            task(&m, &name, &file, &mut Rng(seed), until).await;
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    // Every task is done: nothing of theirs may be left held.
    let bound = tokio::time::Instant::now() + Duration::from_secs(10);
    while m.held_lock_count() > 0 && tokio::time::Instant::now() < bound {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    append(&file, format!("# {worker} left {}\n", m.held_lock_count()));
}

async fn task(
    m: &PostgresLockManager,
    name: &str,
    file: &std::sync::Mutex<std::fs::File>,
    rng: &mut Rng,
    until: u128,
) {
    let mut errors = 0u64;
    while now_ns() < until {
        let bits = rng.next();
        let key = format!("rw:key:{}", bits % KEYS);
        let write = bits >> 8 & 3 == 0; // one section in four writes
        let give_up = bits >> 12 & 7 == 0; // one wait in eight is dropped early
        let wait = if give_up {
            Duration::from_micros(rng.next() % 1500)
        } else {
            Duration::from_secs(30)
        };
        let acquiring = async {
            match write {
                true => m.acquire(&key, None).await,
                false => m.acquire_shared(&key, None).await,
            }
        };
        let guard = match tokio::time::timeout(wait, acquiring).await {
            Ok(Ok(g)) => g,
            Ok(Err(e)) => {
                eprintln!("{name}: a wait failed: {e}");
                errors += 1;
                continue;
            }
            Err(_) if give_up => continue,
            Err(_) => {
                eprintln!(
                    "{name}: a {} wait never got {key}",
                    if write { "write" } else { "read" }
                );
                errors += 1;
                continue;
            }
        };
        let enter = now_ns();
        tokio::time::sleep(Duration::from_micros(100 + rng.next() % 900)).await;
        let exit = now_ns();
        let lost = guard.is_lost();
        let mode = if write { "w" } else { "r" };
        if guard.release().await.is_ok() && !lost {
            append(file, format!("{name} {key} {mode} {enter} {exit}\n"));
        }
    }
    append(file, format!("# {name} errors {errors}\n"));
}

#[derive(Debug, Default)]
struct Verdict {
    reads: usize,
    writes: usize,
    most_readers: i32,
    errors: u64,
    left: u64,
    violations: Vec<String>,
}

fn check(log: &str) -> Verdict {
    let mut v = Verdict::default();
    // Per key: (time, +1/-1, is_write); exits sort before enters at equal times.
    let mut events: HashMap<&str, Vec<(u128, i32, bool)>> = HashMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] == "#" {
            match f[2] {
                "errors" => v.errors += f[3].parse::<u64>().unwrap(),
                _ => v.left += f[3].parse::<u64>().unwrap(),
            }
            continue;
        }
        let write = f[2] == "w";
        if write {
            v.writes += 1;
        } else {
            v.reads += 1;
        }
        let e = events.entry(f[1]).or_default();
        e.push((f[3].parse().unwrap(), 1, write));
        e.push((f[4].parse().unwrap(), -1, write));
    }
    for (key, mut e) in events {
        e.sort_by_key(|&(t, d, _)| (t, d));
        let (mut readers, mut writers) = (0i32, 0i32);
        for (t, d, write) in e {
            match write {
                true => writers += d,
                false => readers += d,
            }
            v.most_readers = v.most_readers.max(readers);
            if writers > 1 || (writers == 1 && readers > 0) {
                v.violations.push(format!(
                    "{key}: {writers} writers and {readers} readers at {t}"
                ));
            }
        }
    }
    v
}

#[test]
fn the_checker_tells_shared_from_overlapping_writes() {
    let v = check("a k r 10 20\nb k r 15 30\n# a errors 0\n# w0 left 0\n");
    assert!(v.violations.is_empty() && v.most_readers == 2, "{v:?}");
    assert_eq!(check("a k w 10 20\nb k r 19 30\n").violations.len(), 1);
    assert_eq!(check("a k w 10 20\nb k w 15 30\n").violations.len(), 1);
    assert!(check("a k w 10 20\nb k r 20 30\nc j w 10 30\n")
        .violations
        .is_empty());
    assert_eq!(check("# a errors 2\n# w left 3\n").errors, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_writers_exclude_and_nobody_starves_across_processes() {
    let (_cluster, db) = private_db(&[]).await;
    let workers: u64 = if stress() { 8 } else { 3 };
    let secs: u64 = if stress() { 30 } else { 4 };
    let dir = std::env::temp_dir().join(format!("eventsource-rw-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sections.log");
    std::fs::write(&log, "").unwrap();
    let until = now_ns() + u128::from(secs) * 1_000_000_000;
    let mut children = Vec::new();
    for w in 0..workers {
        children.push(
            Command::new(std::env::current_exe().unwrap())
                .args(common::worker_args(module_path!(), "rw_worker"))
                .arg("--nocapture")
                .env("ES_RW_URL", db.url())
                .env("ES_RW_WORKER", format!("w{w}"))
                .env("ES_RW_LOG", &log)
                .env("ES_RW_UNTIL_NS", until.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
    }
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "a worker failed: {status}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let v = check(&text);
    eprintln!(
        "rw checker: {workers} processes x {TASKS} tasks, {secs} s: {} reads, {} writes, at most \
         {} readers at once, {} failed long waits, {} locks left held, {} violations",
        v.reads,
        v.writes,
        v.most_readers,
        v.errors,
        v.left,
        v.violations.len()
    );
    assert!(v.violations.is_empty(), "{:#?}", v.violations);
    assert!(v.writes > 0 && v.reads > 0, "both modes ran: {v:?}");
    assert!(
        v.most_readers > 1,
        "readers never shared: the check proves little"
    );
    assert_eq!(v.errors, 0, "a long wait was not granted (starvation?)");
    assert_eq!(v.left, 0, "a given-up wait left a lock held");
}
