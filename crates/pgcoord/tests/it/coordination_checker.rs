//! Multi-process checkers of the coordination primitives, in the manner of
//! `exclusion_checker.rs`: worker OS processes (this test binary, run as a
//! child) hammer one semaphore or random overlapping key sets for a bounded
//! time and append every critical section to a shared log; the parent then
//! checks the log.
//!
//! - Semaphore: never more than N sections at once, never two on one slot.
//! - `acquire_many`: never two sections on one key; every call with a long
//!   timeout succeeds (a deadlock would leave calls waiting until they fail);
//!   after every call that failed or was dropped on purpose, its manager
//!   holds nothing (no partial holds).
//!
//! `EVENTSOURCE_STRESS=1` runs longer with more workers.

use crate::common;
use crate::fault_support;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fault_support::*;
use pgcoord::coordination::{acquire_many, Semaphore};
use pgcoord::PostgresLockManager;
use pgcoord::{error::AcquireFailure, LockRegistry};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn stress() -> bool {
    std::env::var("EVENTSOURCE_STRESS").is_ok_and(|v| v == "1")
}

const PERMITS: u32 = 2;
const KEYS: usize = 6;

fn worker_manager(url: &str, holder: String) -> PostgresLockManager {
    PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(holder)
        .build()
        .unwrap()
}

fn append(file: &std::sync::Mutex<std::fs::File>, line: String) {
    file.lock().unwrap().write_all(line.as_bytes()).unwrap();
}

/// One worker process. `ES_CO_MODE` is `semaphore` (tasks share one
/// manager) or `many` (one manager per task, so that a task's manager
/// holding anything after a failed call is a partial hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn coordination_worker() {
    let url =
        std::env::var("ES_CO_URL").expect("ES_CO_URL: a worker, started by the tests in this file");
    let var = |n: &str| std::env::var(n).unwrap();
    let (mode, worker, log) = (var("ES_CO_MODE"), var("ES_CO_WORKER"), var("ES_CO_LOG"));
    let tasks: u64 = var("ES_CO_TASKS").parse().unwrap();
    let until: u128 = var("ES_CO_UNTIL_NS").parse().unwrap();
    let file = std::sync::Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
    ));
    let shared = worker_manager(&url, format!("co-{worker}"));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (file, name) = (file.clone(), format!("{worker}.{t}"));
        let m = if mode == "many" {
            worker_manager(&url, format!("co-{worker}-{t}"))
        } else {
            shared.clone()
        };
        let mode = mode.clone();
        handles.push(tokio::spawn(async move {
            let mut rng =
                Rng(0x9E37_79B9_7F4A_7C15 ^ ((std::process::id() as u64) << 8 | t) << 1 | 1);
            if mode == "many" {
                many_task(&m, &name, &file, &mut rng, until).await;
            } else {
                semaphore_task(m, &name, &file, &mut rng, until).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

async fn semaphore_task(
    m: PostgresLockManager,
    name: &str,
    file: &std::sync::Mutex<std::fs::File>,
    rng: &mut Rng,
    until: u128,
) {
    let sem = Semaphore::new(m, "co:sem", PERMITS).unwrap();
    let mut errors = 0u64;
    while now_ns() < until {
        let Ok(p) = sem.acquire(Some(Duration::from_secs(30))).await else {
            errors += 1;
            continue;
        };
        let p_slot = p.slot();
        let enter = now_ns();
        tokio::time::sleep(Duration::from_micros(200 + rng.next() % 800)).await;
        let exit = now_ns();
        let lost = p.is_lost() || p.release().await.is_err();
        if !lost {
            append(file, format!("{name} sem,slot{} {enter} {exit}\n", p_slot));
        }
    }
    append(file, format!("# {name} errors {errors}\n"));
}

async fn many_task(
    m: &PostgresLockManager,
    name: &str,
    file: &std::sync::Mutex<std::fs::File>,
    rng: &mut Rng,
    until: u128,
) {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("co:key:{i}")).collect();
    let (mut errors, mut partial, mut cancelled) = (0u64, 0u64, 0u64);
    while now_ns() < until {
        let bits = rng.next();
        let mut set: Vec<usize> = (0..KEYS).filter(|i| bits >> i & 1 == 1).collect();
        if set.is_empty() {
            set.push((bits % KEYS as u64) as usize);
        }
        let turn = (bits >> 8) as usize % set.len();
        set.rotate_left(turn);
        let asked: Vec<&str> = set.iter().map(|&i| keys[i].as_str()).collect();
        // One call in four has a short timeout or is dropped mid-way; the
        // others must succeed.
        let outcome = match bits >> 16 & 3 {
            0 => {
                let t = Duration::from_micros(500 + rng.next() % 2000);
                acquire_many(m, &asked, Some(t)).await.ok()
            }
            1 => {
                let t = Duration::from_micros(rng.next() % 2000);
                tokio::time::timeout(t, acquire_many(m, &asked, None))
                    .await
                    .ok()
                    .map(|r| r.unwrap())
            }
            _ => match acquire_many(m, &asked, Some(Duration::from_secs(30))).await {
                Ok(g) => Some(g),
                // A cancel request the engine sent for an earlier, dropped
                // wait of this manager once reached the next one (fixed:
                // a session sent a cancel is closed): counted apart, and
                // asserted to be none.
                Err(e)
                    if matches!(
                        e.as_lock_acquisition().map(|a| &a.reason),
                        Some(AcquireFailure::Cancelled { .. })
                    ) =>
                {
                    cancelled += 1;
                    None
                }
                Err(e) => {
                    eprintln!("{name}: a long wait failed: {e}");
                    errors += 1;
                    None
                }
            },
        };
        let Some(guard) = outcome else {
            // Given up or dropped: nothing of the set may stay held.
            let bound = tokio::time::Instant::now() + Duration::from_secs(10);
            while m.held_lock_count() > 0 && tokio::time::Instant::now() < bound {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            partial += u64::from(m.held_lock_count() > 0);
            continue;
        };
        let enter = now_ns();
        tokio::time::sleep(Duration::from_micros(100 + rng.next() % 400)).await;
        let exit = now_ns();
        let lost = guard.is_lost();
        let ids: Vec<String> = set.iter().map(usize::to_string).collect();
        if guard.release().await.is_ok() && !lost {
            append(file, format!("{name} {} {enter} {exit}\n", ids.join(",")));
        }
    }
    append(
        file,
        format!("# {name} errors {errors} partial {partial} cancelled {cancelled}\n"),
    );
}

#[derive(Debug, Default)]
struct Verdict {
    sections: usize,
    most_at_once: usize,
    errors: u64,
    partial: u64,
    /// Long waits the server cancelled on the engine's behalf.
    cancelled: u64,
    /// Keys (or the semaphore) held by more sections at once than allowed.
    violations: Vec<String>,
}

/// Every section's resources: at most `limit` sections may overlap on
/// resource `sem`, at most one on any other (a key, a slot).
fn check(log: &str, limit: usize) -> Verdict {
    let mut v = Verdict::default();
    let mut events: HashMap<String, Vec<(u128, i32)>> = HashMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] == "#" {
            v.errors += f[3].parse::<u64>().unwrap();
            if f.len() > 7 {
                v.partial += f[5].parse::<u64>().unwrap();
                v.cancelled += f[7].parse::<u64>().unwrap();
            }
            continue;
        }
        v.sections += 1;
        let (enter, exit): (u128, u128) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        for r in f[1].split(',') {
            let e = events.entry(r.to_owned()).or_default();
            e.push((enter, 1));
            e.push((exit, -1));
        }
    }
    for (r, mut e) in events {
        let limit = if r == "sem" { limit } else { 1 };
        // At equal times, exits first: touching sections do not overlap.
        e.sort();
        let mut now = 0i32;
        for (t, d) in e {
            now += d;
            v.most_at_once = v.most_at_once.max(now as usize);
            if now as usize > limit {
                v.violations.push(format!("{r}: {now} holders at {t}"));
            }
        }
    }
    v
}

#[test]
fn the_checker_counts_overlaps_per_resource() {
    let v = check("a sem 10 20\nb sem 15 30\nc sem 20 25\n", 2);
    assert!(v.violations.is_empty() && v.most_at_once == 2, "{v:?}");
    let v = check("a sem 10 20\nb sem 15 30\nc sem 16 25\n", 2);
    assert_eq!(v.violations.len(), 1);
    let v = check("a sem,slot0 10 20\nb sem,slot0 15 30\n", 2);
    assert_eq!(v.violations.len(), 1, "two sections on one slot");
    let v = check(
        "a 1,2 10 20\nb 2,3 19 30\n# a errors 1 partial 2 cancelled 3\n",
        1,
    );
    assert_eq!(v.violations.len(), 1);
    assert!(v.violations[0].starts_with("2:"));
    assert_eq!((v.errors, v.partial, v.cancelled), (1, 2, 3));
}

async fn run(mode: &str) -> Verdict {
    let (_cluster, db) = private_db(&[]).await;
    let workers: u64 = if stress() { 8 } else { 4 };
    let secs: u64 = if stress() { 30 } else { 3 };
    let dir = std::env::temp_dir().join(format!("eventsource-co-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sections.log");
    std::fs::write(&log, "").unwrap();
    let until = now_ns() + u128::from(secs) * 1_000_000_000;
    let mut children = Vec::new();
    for w in 0..workers {
        children.push(
            Command::new(std::env::current_exe().unwrap())
                .args(common::worker_args(module_path!(), "coordination_worker"))
                .arg("--nocapture")
                .env("ES_CO_URL", db.url())
                .env("ES_CO_MODE", mode)
                .env("ES_CO_WORKER", format!("w{w}"))
                .env("ES_CO_LOG", &log)
                .env("ES_CO_TASKS", "3")
                .env("ES_CO_UNTIL_NS", until.to_string())
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
    let limit = PERMITS as usize;
    let v = check(&text, limit);
    eprintln!(
        "coordination checker ({mode}): {workers} processes x 3 tasks, {secs} s: {} sections, \
         at most {} at once on one resource (limit {}), {} failed long waits ({} more cancelled \
         by the server), {} partial holds, {} violations",
        v.sections,
        v.most_at_once,
        if mode == "many" { 1 } else { limit },
        v.errors,
        v.cancelled,
        v.partial,
        v.violations.len()
    );
    assert!(v.violations.is_empty(), "{:#?}", v.violations);
    assert!(v.sections > 0, "no section ran: the check proves nothing");
    assert_eq!(v.errors, 0, "a wait with a long timeout failed (deadlock?)");
    assert_eq!(
        v.cancelled, 0,
        "a cancel meant for a dropped wait hit another"
    );
    assert_eq!(v.partial, 0, "a failed or dropped call left keys held");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_n_processes_hold_a_permit() {
    run("semaphore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_across_processes_finish_exclude_and_leave_nothing() {
    run("many").await;
}
