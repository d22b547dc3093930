//! The mutual-exclusion checker: several OS processes hammer a few hot keys
//! for a bounded time; every critical section is appended to a shared log
//! as (process, key, enter, exit, loss); the checker then verifies that no
//! two critical sections on one key overlap unless one of the two holders
//! was told of the loss of its lock: before the later one entered (allowed),
//! or only after (the window no lock closes without fencing, reported as
//! "told late"). An overlap where neither was told is a violation.
//!
//! Run with and without faults (random backends of the workers terminated
//! during the run). A small run is part of the suite; a larger one with
//! `EVENTSOURCE_STRESS=1` (`EVENTSOURCE_STRESS_SECS`,
//! `EVENTSOURCE_STRESS_WORKERS` tune it).

use crate::checker_support;
use crate::common;
use crate::fault_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use checker_support::*;
use fault_support::*;
use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

/// One worker process (run by the tests below as a child): `ES_MX_TASKS`
/// tasks on one manager, each looping acquire -> record enter -> 0.2-0.5 ms
/// of work -> record exit and loss -> release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn exclusion_worker() {
    let url =
        std::env::var("ES_MX_URL").expect("ES_MX_URL: a worker, started by the tests in this file");
    let var = |n: &str| std::env::var(n).unwrap();
    let (worker, log) = (var("ES_MX_WORKER"), var("ES_MX_LOG"));
    let keys: u64 = var("ES_MX_KEYS").parse().unwrap();
    let tasks: u64 = var("ES_MX_TASKS").parse().unwrap();
    let until: u128 = var("ES_MX_UNTIL_NS").parse().unwrap();
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("mx-{worker}"))
        .liveness_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let file = std::sync::Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
    ));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (m, file, worker) = (m.clone(), file.clone(), format!("{worker}.{t}"));
        handles.push(tokio::spawn(async move {
            let seed = (std::process::id() as u64) << 8 | t;
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed << 1 | 1);
            let mut errors = 0u64;
            while now_ns() < until {
                let key = format!("mx:hot:{}", rng.next() % keys);
                let guard = match m.acquire(&key, Some(Duration::from_secs(5))).await {
                    Ok(g) => g,
                    Err(_) => {
                        // Timeouts under contention, or a terminated session.
                        errors += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                };
                let enter = now_ns();
                let work = Duration::from_micros(200 + rng.next() % 300);
                let loss = tokio::select! {
                    _ = tokio::time::sleep(work) => None,
                    _ = guard.lost() => Some(now_ns()),
                };
                let exit = now_ns();
                // A lock lost in the last moments of the section is only
                // noticed at release: that holder was told late (the
                // no-fencing window), which the checker reports apart from a
                // real violation, where the release succeeds and the lock
                // was really held all along.
                let released = guard.release().await;
                let loss = match (loss, released) {
                    (Some(t), _) => Some(t),
                    (None, Err(e)) if e.is_lock_lost() => Some(now_ns()),
                    (None, _) => None,
                };
                let loss = loss.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
                // One write per line, in append mode: lines never interleave.
                let line = format!("{worker} {key} {enter} {exit} {loss}\n");
                file.lock().unwrap().write_all(line.as_bytes()).unwrap();
            }
            let line = format!("# {worker} errors {errors}\n");
            file.lock().unwrap().write_all(line.as_bytes()).unwrap();
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    m.close().await.unwrap();
}

#[test]
fn the_checker_finds_overlaps_and_accepts_told_losses() {
    let v = check("a k 10 20 -\nb k 20 30 -\nc j 0 5 -\n");
    assert!(v.violations.is_empty() && v.sections == 3 && v.keys == 2);
    let v = check("a k 10 20 -\nb k 15 30 -\n");
    assert_eq!(v.violations.len(), 1);
    // a was told at 14, b entered at 15: allowed.
    let v = check("a k 10 20 14\nb k 15 30 -\n");
    assert!(v.violations.is_empty() && v.told_before == 1);
    // a was told at 16, after b entered at 15: not a violation of the
    // lock, but the unfenced window; reported apart.
    let v = check("a k 10 20 16\nb k 15 30 -\n");
    assert!(v.violations.is_empty() && v.told_after.len() == 1);
    // b entered with a lock already lost and was told within its section
    // (at 17, before its exit at 18): told late, not a violation...
    let v = check("a k 10 20 -\nb k 15 18 17\n");
    assert!(v.violations.is_empty() && v.told_after.len() == 1);
    // ...but told only at its release, after its exit: a violation.
    let v = check("a k 10 20 -\nb k 15 18 19\n");
    assert_eq!(v.violations.len(), 1);
    // A long section overlapping several later ones is caught for each.
    let v = check("a k 0 100 -\nb k 10 20 -\nc k 30 40 -\n# a errors 2\n");
    assert_eq!(v.violations.len(), 2);
    assert_eq!(v.errors, 2);
}

async fn run(faults: bool) -> Verdict {
    let (_cluster, db) = private_db(&[]).await;
    let workers = env_or("EVENTSOURCE_STRESS_WORKERS", 4, 8);
    let tasks = env_or("EVENTSOURCE_STRESS_TASKS", 3, 4);
    let secs = env_or("EVENTSOURCE_STRESS_SECS", 4, 30);
    let keys = 2;
    let dir = std::env::temp_dir().join(format!("eventsource-mx-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sections.log");
    std::fs::write(&log, "").unwrap();
    let until = now_ns() + u128::from(secs) * 1_000_000_000;
    let mut children = Vec::new();
    for w in 0..workers {
        children.push(
            Command::new(std::env::current_exe().unwrap())
                .args(common::worker_args(module_path!(), "exclusion_worker"))
                .env("ES_MX_URL", db.url())
                .env("ES_MX_WORKER", format!("w{w}"))
                .env("ES_MX_LOG", &log)
                .env("ES_MX_KEYS", keys.to_string())
                .env("ES_MX_TASKS", tasks.to_string())
                .env("ES_MX_UNTIL_NS", until.to_string())
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    let mut terminated = 0;
    if faults {
        let client = db.connect().await.unwrap();
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        while now_ns() < until {
            // Every 20-80 ms, as the issue that found the dedicated-wait
            // bug did: about 500 terminations in 30 s.
            tokio::time::sleep(Duration::from_millis(20 + rng.next() % 60)).await;
            let row = client
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity \
                     WHERE application_name LIKE 'eventsource/mx-%' ORDER BY random() LIMIT 1) t",
                    &[],
                )
                .await
                .unwrap();
            terminated += row.get::<_, i64>(0);
        }
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
        "exclusion checker ({}): {workers} processes x {tasks} tasks, {keys} keys, {secs} s: {} critical sections \
         checked, {} losses signalled, {terminated} backends terminated, {} acquisition errors; \
         overlaps: {} after a loss told in time, {} told late, {} violations",
        if faults { "with faults" } else { "no faults" },
        v.sections,
        v.losses,
        v.errors,
        v.told_before,
        v.told_after.len(),
        v.violations.len()
    );
    assert!(
        v.violations.is_empty(),
        "exclusion broken: {:#?}",
        v.violations
    );
    assert!(
        v.sections > 0,
        "no critical section ran: the check proves nothing"
    );
    if faults {
        assert!(terminated > 0, "no fault was injected");
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_processes_hold_a_key_at_once() {
    let v = run(false).await;
    assert_eq!(v.losses, 0, "a lock was lost without any fault");
    assert!(v.told_after.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_processes_hold_a_key_at_once_while_backends_are_terminated() {
    let v = run(true).await;
    // Each late notice is printed: the window is documented, not hidden.
    for w in &v.told_after {
        eprintln!("told late: {w}");
    }
}
