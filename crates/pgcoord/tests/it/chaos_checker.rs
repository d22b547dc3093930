//! The chaos checker: what fencing protects, under every fault the suite
//! knows.
//!
//! Several worker processes (fenced managers in lease mode, each behind its
//! own TCP proxy) take a few hot keys; in each critical section a task
//! does a read-modify-write of the key's counter row on a separate data
//! connection, guarded by `fencing::check` in the same transaction, and
//! logs a row `(key, fence, counter_after)` with it. Half the tasks stop
//! writing when their loss signal fires; the other half never look at it,
//! so that only the fence stands between their late writes and the data. Meanwhile the parent
//! terminates lock backends, restarts the server (fast and immediate),
//! black-holes a worker's network, SIGKILLs a worker (and starts a new
//! one) and SIGSTOPs one past its lease.
//!
//! From the database alone, afterwards: in counter order a key's fences
//! never go down (a decrease is a **stale protected write accepted**), and
//! the counter equals the number of writes (a shortfall is a **lost
//! update**). Both must be 0. From the section log: overlaps told late
//! (the window fencing exists for; expected above 0 under faults).
//!
//! A short run is part of the suite; `EVENTSOURCE_STRESS=1` runs a long
//! one (`EVENTSOURCE_STRESS_SECS`, `EVENTSOURCE_STRESS_WORKERS`).
//! `EVENTSOURCE_CHAOS_UNFENCED=1` is the control: the same run with the
//! writes' fence check left out, where the audit is reported, not asserted.

use crate::checker_support;
use crate::common;
use crate::fault_support;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checker_support::*;
use fault_support::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord::DistributedLock;
use pgcoord::{postgres::fencing, PostgresLockManager};
use pgcoord_testkit::pg::StopMode;

const LEASE: Duration = Duration::from_secs(2);

/// Opens the task's data connection, retrying while the server restarts.
async fn data_client(url: &str, until: u128) -> Option<tokio_postgres::Client> {
    while now_ns() < until {
        if let Ok((client, conn)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            return Some(client);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// One critical section's protected write; its outcome for the log.
async fn protected_write(
    data: &mut tokio_postgres::Client,
    guard: &pgcoord::LockGuard,
    work: Duration,
) -> &'static str {
    let Ok(tx) = data.transaction().await else {
        return "error";
    };
    // The control run leaves the check out, to show what the audit catches.
    if std::env::var("ES_CX_UNFENCED").is_err() {
        match fencing::check(&tx, guard.info()).await {
            Ok(_) => {}
            Err(e) if e.is_fenced() => return "refused",
            Err(_) => return "error",
        }
    }
    let key = guard.key();
    let Ok(row) = tx
        .query_one(
            "SELECT counter FROM chaos_protected WHERE key = $1",
            &[&key],
        )
        .await
    else {
        return "error";
    };
    let next = row.get::<_, i64>(0) + 1;
    tokio::time::sleep(work).await; // widen the window a stale holder would need
    let fence = guard.fence().unwrap() as i64;
    let write = async {
        tx.execute(
            "UPDATE chaos_protected SET counter = $2 WHERE key = $1",
            &[&key, &next],
        )
        .await?;
        tx.execute(
            "INSERT INTO chaos_writes (key, fence, counter_after) VALUES ($1, $2, $3)",
            &[&key, &fence, &next],
        )
        .await?;
        tx.commit().await
    };
    if write.await.is_ok() {
        "committed"
    } else {
        "error"
    }
}

/// One worker process (run by the test below as a child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn chaos_worker() {
    let url =
        std::env::var("ES_CX_URL").expect("ES_CX_URL: a worker, started by the tests in this file");
    let var = |n: &str| std::env::var(n).unwrap();
    let (worker, log, data_url) = (var("ES_CX_WORKER"), var("ES_CX_LOG"), var("ES_CX_DATA_URL"));
    let keys: u64 = var("ES_CX_KEYS").parse().unwrap();
    let tasks: u64 = var("ES_CX_TASKS").parse().unwrap();
    let until: u128 = var("ES_CX_UNTIL_NS").parse().unwrap();
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("cx-{worker}"))
        .fencing(true)
        .lease(LEASE)
        .liveness_interval(Duration::from_millis(100))
        .liveness_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let file = Arc::new(Mutex::new(
        std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
    ));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (m, file, data_url) = (m.clone(), file.clone(), data_url.clone());
        let name = format!("{worker}.{t}");
        handles.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((std::process::id() as u64) << 8 | t) | 1);
            let mut errors = 0u64;
            // Odd tasks never look at the loss signal while they write: only
            // the fence stands between their late writes and the data.
            let careless = t % 2 == 1;
            let mut data = data_client(&data_url, until).await;
            while now_ns() < until {
                let Some(client) = data.as_mut() else { break };
                let key = format!("cx:hot:{}", rng.next() % keys);
                let Ok(guard) = m.acquire(&key, Some(Duration::from_secs(5))).await else {
                    errors += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let enter = now_ns();
                let work = Duration::from_micros(200 + rng.next() % 300);
                let (outcome, lost_at) = if careless {
                    // Works a while before it writes, as a holder computing
                    // its update would: a loss in that time goes unseen.
                    tokio::time::sleep(work * 4).await;
                    (protected_write(client, &guard, work).await, None)
                } else {
                    tokio::select! {
                        o = protected_write(client, &guard, work) => (o, None),
                        _ = guard.lost() => ("lost", Some(now_ns())),
                    }
                };
                let exit = now_ns();
                let lost_at = match (lost_at, guard.release().await) {
                    (Some(t), _) => Some(t),
                    (None, Err(e)) if e.is_lock_lost() => Some(now_ns()),
                    (None, _) => None,
                };
                let loss = lost_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
                let line = format!("{name} {key} {enter} {exit} {loss} {outcome}\n");
                file.lock().unwrap().write_all(line.as_bytes()).unwrap();
                if outcome == "error" || client.is_closed() {
                    data = data_client(&data_url, until).await;
                }
            }
            let line = format!("# {name} errors {errors}\n");
            file.lock().unwrap().write_all(line.as_bytes()).unwrap();
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), m.close()).await;
}

/// The faults injected, by kind.
#[derive(Debug, Default)]
struct Faults {
    terminated: i64,
    fast_restarts: u32,
    immediate_restarts: u32,
    black_holes: u32,
    killed: u32,
    stopped: u32,
}

struct Worker {
    child: Child,
    proxy: Proxy,
}

#[allow(clippy::too_many_arguments)]
fn spawn_worker(
    name: &str,
    proxy: Proxy,
    db_name: &str,
    data_url: &str,
    log: &std::path::Path,
    keys: u64,
    tasks: u64,
    until: u128,
) -> Worker {
    let url = format!("postgres://postgres@127.0.0.1:{}/{db_name}", proxy.port);
    let child = Command::new(std::env::current_exe().unwrap())
        .args(common::worker_args(module_path!(), "chaos_worker"))
        .env("ES_CX_URL", url)
        .env("ES_CX_DATA_URL", data_url)
        .env("ES_CX_WORKER", name)
        .env("ES_CX_LOG", log)
        .env("ES_CX_KEYS", keys.to_string())
        .env("ES_CX_TASKS", tasks.to_string())
        .env("ES_CX_UNTIL_NS", until.to_string())
        .envs(unfenced().then_some(("ES_CX_UNFENCED", "1")))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Worker { child, proxy }
}

fn unfenced() -> bool {
    std::env::var("EVENTSOURCE_CHAOS_UNFENCED").is_ok_and(|v| v == "1")
}

/// What the database says about the protected writes: (writes, stale
/// writes accepted, lost updates).
async fn audit(client: &tokio_postgres::Client) -> (usize, usize, i64) {
    let rows = client
        .query(
            "SELECT key, fence, counter_after FROM chaos_writes ORDER BY key, counter_after, fence",
            &[],
        )
        .await
        .unwrap();
    let mut by_key: HashMap<String, Vec<(i64, i64)>> = HashMap::new();
    for r in &rows {
        by_key
            .entry(r.get(0))
            .or_default()
            .push((r.get(1), r.get(2)));
    }
    let mut stale = 0;
    for writes in by_key.values() {
        stale += writes.windows(2).filter(|w| w[1].0 < w[0].0).count();
    }
    let counted: i64 = client
        .query_one(
            "SELECT coalesce(sum(counter), 0)::int8 FROM chaos_protected",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    (rows.len(), stale, rows.len() as i64 - counted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_stay_ordered_under_every_fault() {
    let (cluster, db) = private_db(&[]).await;
    let workers = env_or("EVENTSOURCE_STRESS_WORKERS", 3, 6);
    let tasks = env_or("EVENTSOURCE_STRESS_TASKS", 2, 3);
    let secs = env_or("EVENTSOURCE_STRESS_SECS", 18, 120);
    let keys = 2;
    let setup = db.connect().await.unwrap();
    setup
        .batch_execute(
            "CREATE TABLE chaos_protected (key text PRIMARY KEY, counter bigint NOT NULL); \
             CREATE TABLE chaos_writes (key text, fence bigint, counter_after bigint); \
             INSERT INTO chaos_protected SELECT 'cx:hot:' || i, 0 FROM generate_series(0, 9) i",
        )
        .await
        .unwrap();
    common::manager(&db, "installer")
        .install_fencing()
        .await
        .unwrap();
    drop(setup);
    let dir = std::env::temp_dir().join(format!("eventsource-cx-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sections.log");
    std::fs::write(&log, "").unwrap();
    let until = now_ns() + u128::from(secs) * 1_000_000_000;
    let port = db.config().get_ports()[0];
    let data_url = db.url();
    let mut pool = Vec::new();
    for w in 0..workers {
        let proxy = Proxy::start(port).await;
        pool.push(spawn_worker(
            &format!("w{w}"),
            proxy,
            db.name(),
            &data_url,
            &log,
            keys,
            tasks,
            until,
        ));
    }
    let mut f = Faults::default();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut spawned = workers;
    // The heavy faults in turn, a second apart (every kind gets in even in
    // the short run); in between, lock backends are terminated every
    // 20-120 ms.
    let heavy = ["black_hole", "stop", "fast", "kill", "immediate"];
    let gap = 1_000_000_000;
    let mut next_heavy = now_ns() + gap;
    let mut h = 0;
    while now_ns() + 3_500_000_000 < until {
        if now_ns() >= next_heavy {
            let victim = (rng.next() % pool.len() as u64) as usize;
            let pid = Pid::from_raw(pool[victim].child.id() as i32);
            match heavy[h % heavy.len()] {
                "black_hole" => {
                    pool[victim].proxy.set_mode(ProxyMode::BlackHole);
                    tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
                    // Old connections stay swallowed; new ones get through.
                    pool[victim].proxy.set_mode(ProxyMode::Forward);
                    f.black_holes += 1;
                }
                "stop" => {
                    kill(pid, Signal::SIGSTOP).unwrap();
                    tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
                    kill(pid, Signal::SIGCONT).unwrap();
                    f.stopped += 1;
                }
                "kill" => {
                    kill(pid, Signal::SIGKILL).unwrap();
                    let _ = pool[victim].child.wait();
                    let proxy = Proxy::start(port).await;
                    let name = format!("w{spawned}");
                    spawned += 1;
                    pool[victim] =
                        spawn_worker(&name, proxy, db.name(), &data_url, &log, keys, tasks, until);
                    f.killed += 1;
                }
                mode => {
                    let (c, immediate) = (cluster.clone(), mode == "immediate");
                    let stop = if immediate {
                        StopMode::Immediate
                    } else {
                        StopMode::Fast
                    };
                    tokio::task::spawn_blocking(move || c.restart(stop))
                        .await
                        .unwrap()
                        .unwrap();
                    if immediate {
                        f.immediate_restarts += 1
                    } else {
                        f.fast_restarts += 1
                    }
                }
            }
            h += 1;
            next_heavy = now_ns() + gap;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(20 + rng.next() % 100)).await;
        if let Ok(client) = db.connect().await {
            let row = client
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity \
                     WHERE application_name LIKE 'eventsource/cx-%' ORDER BY random() LIMIT 1) t",
                    &[],
                )
                .await;
            f.terminated += row.map(|r| r.get::<_, i64>(0)).unwrap_or(0);
        }
    }
    for mut w in pool {
        let status = tokio::task::spawn_blocking(move || w.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "a worker failed: {status}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let v = check(&text);
    let outcomes = |o: &str| {
        text.lines()
            .filter(|l| l.ends_with(&format!(" {o}")))
            .count()
    };
    let client = db.connect().await.unwrap();
    let (writes, stale, lost) = audit(&client).await;
    eprintln!(
        "chaos checker{}: {workers} processes x {tasks} tasks, {keys} keys, {secs} s, lease {LEASE:?}: \
         {} critical sections ({} writes committed, {} refused as fenced, {} lost mid-section, {} \
         failed), faults {f:?}; overlaps: {} told in time, {} told late, {} untold; stale protected \
         writes accepted: {stale}; lost updates: {lost}",
        if unfenced() { " (control, fence check left out)" } else { "" },
        v.sections,
        writes,
        outcomes("refused"),
        outcomes("lost"),
        outcomes("error"),
        v.told_before,
        v.told_after.len(),
        v.violations.len(),
    );
    if unfenced() {
        return;
    }
    assert_eq!(stale, 0, "a write under a replaced holder was accepted");
    assert_eq!(lost, 0, "protected counter updates were lost");
    assert!(
        writes > 0,
        "no protected write committed: the check proves nothing"
    );
    assert!(f.terminated > 0 && f.killed > 0 && f.stopped > 0 && f.black_holes > 0);
    assert!(f.fast_restarts > 0 && f.immediate_restarts > 0, "{f:?}");
}
