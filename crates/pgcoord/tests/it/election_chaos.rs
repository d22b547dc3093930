//! The election checker: what terms protect, under every fault the suite
//! knows.
//!
//! Several candidate processes (fenced managers in lease mode, each behind
//! its own TCP proxy), each with a few tasks, campaign for one election.
//! A task that leads makes a few writes, each in its own transaction on a
//! separate data connection, guarded by `fencing::check_token` with its
//! term, then resigns and campaigns again. Half the tasks never look at
//! their loss signal and work a little before each write, so that only
//! the term check stands between a deposed leader's late writes and the
//! data. Meanwhile the parent terminates candidates' backends (every other
//! time the leader's), restarts the server (fast and immediate), and, on
//! the worker that leads at the time, black-holes its network, SIGKILLs it
//! (and starts a new one) and SIGSTOPs it past its lease.
//!
//! From the database alone, afterwards (`election_support::audit`): along
//! the accepted writes' commit order, terms never go down (a decrease is a
//! **stale write accepted**), and each term's writes come from one leader.
//! Both must be 0. From the tenure log: every leader had its own term, and
//! overlapping tenures (expected under faults: a deposed leader that had
//! not yet heard) are counted.
//!
//! A short run is part of the suite; `EVENTSOURCE_STRESS=1` runs a long
//! one (`EVENTSOURCE_STRESS_SECS`, `EVENTSOURCE_STRESS_WORKERS`,
//! `EVENTSOURCE_STRESS_TASKS`). `EVENTSOURCE_ELECTION_UNFENCED=1` is the
//! control: the same run with the term check left out, where the audit is
//! reported, not asserted.

use crate::checker_support;
use crate::common;
use crate::election_support;
use crate::fault_support;

use std::collections::HashSet;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checker_support::*;
use election_support::*;
use fault_support::*;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord::coordination::Election;
use pgcoord::PostgresLockManager;
use pgcoord_testkit::pg::StopMode;

const LEASE: Duration = Duration::from_secs(2);

/// One candidate process (run by the test below as a child). A tenure is
/// logged as `task key enter exit loss term committed refused failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn election_candidate() {
    let url = std::env::var("ES_EL_URL")
        .expect("ES_EL_URL: a candidate, started by the tests in this file");
    let var = |n: &str| std::env::var(n).unwrap();
    let (worker, log, data_url) = (var("ES_EL_WORKER"), var("ES_EL_LOG"), var("ES_EL_DATA_URL"));
    let tasks: u64 = var("ES_EL_TASKS").parse().unwrap();
    let until: u128 = var("ES_EL_UNTIL_NS").parse().unwrap();
    let fenced = std::env::var("ES_EL_UNFENCED").is_err();
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(format!("el-{worker}"))
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
        let election = Election::new(m.clone(), ELECTION).expect("a fencing lock manager");
        let (file, data_url) = (file.clone(), data_url.clone());
        let name = format!("{worker}.{t}");
        handles.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((std::process::id() as u64) << 8 | t) | 1);
            let mut errors = 0u64;
            let careless = t % 2 == 1;
            let mut data = data_client(&data_url, until).await;
            while now_ns() < until {
                let Some(client) = data.as_mut() else { break };
                let Ok(leading) = election.campaign(Some(Duration::from_secs(5))).await else {
                    errors += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let (enter, term) = (now_ns(), leading.term());
                let mut counts = [0u32; 3];
                let mut lost_at = None;
                for _ in 0..2 + rng.next() % 6 {
                    let work = Duration::from_micros(200 + rng.next() % 300);
                    let outcome = if careless {
                        // Works before it writes, as a leader computing its
                        // next step would: a loss in that time goes unseen.
                        tokio::time::sleep(work * 4).await;
                        fenced_write(client, election.key(), term, &name, work, fenced).await
                    } else {
                        tokio::select! {
                            o = fenced_write(client, election.key(), term, &name, work, fenced) => o,
                            _ = leading.lost() => {
                                lost_at = Some(now_ns());
                                break;
                            }
                        }
                    };
                    counts[outcome as usize] += 1;
                    if outcome == Outcome::Error || client.is_closed() {
                        break;
                    }
                }
                let exit = now_ns();
                let lost_at = match (lost_at, leading.resign().await) {
                    (Some(t), _) => Some(t),
                    (None, Err(e)) if e.is_lock_lost() => Some(now_ns()),
                    (None, _) => None,
                };
                let loss = lost_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
                let [c, r, f] = counts;
                let key = election.key();
                let line = format!("{name} {key} {enter} {exit} {loss} {term} {c} {r} {f}\n");
                file.lock().unwrap().write_all(line.as_bytes()).unwrap();
                if f > 0 || client.is_closed() {
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
    leader_terminated: i64,
    fast_restarts: u32,
    immediate_restarts: u32,
    black_holes: u32,
    killed: u32,
    stopped: u32,
}

struct Worker {
    name: String,
    child: Child,
    proxy: Proxy,
}

struct Run {
    db_name: String,
    data_url: String,
    log: std::path::PathBuf,
    tasks: u64,
    until: u128,
    port: u16,
}

impl Run {
    async fn spawn(&self, name: String) -> Worker {
        let proxy = Proxy::start(self.port).await;
        let url = format!(
            "postgres://postgres@127.0.0.1:{}/{}",
            proxy.port, self.db_name
        );
        let child = Command::new(std::env::current_exe().unwrap())
            .args(common::worker_args(module_path!(), "election_candidate"))
            .env("ES_EL_URL", url)
            .env("ES_EL_DATA_URL", &self.data_url)
            .env("ES_EL_WORKER", &name)
            .env("ES_EL_LOG", &self.log)
            .env("ES_EL_TASKS", self.tasks.to_string())
            .env("ES_EL_UNTIL_NS", self.until.to_string())
            .envs(unfenced().then_some(("ES_EL_UNFENCED", "1")))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Worker { name, child, proxy }
    }
}

fn unfenced() -> bool {
    std::env::var("EVENTSOURCE_ELECTION_UNFENCED").is_ok_and(|v| v == "1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_fenced_writes_stay_ordered_under_every_fault() {
    let (cluster, db) = private_db(&[]).await;
    let workers = env_or("EVENTSOURCE_STRESS_WORKERS", 3, 6);
    let tasks = env_or("EVENTSOURCE_STRESS_TASKS", 2, 3);
    let secs = env_or("EVENTSOURCE_STRESS_SECS", 18, 120);
    db.connect()
        .await
        .unwrap()
        .batch_execute(SCHEMA)
        .await
        .unwrap();
    common::manager(&db, "installer")
        .install_fencing()
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("eventsource-el-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("tenures.log");
    std::fs::write(&log, "").unwrap();
    let run = Run {
        db_name: db.name().to_owned(),
        data_url: db.url(),
        log: log.clone(),
        tasks,
        until: now_ns() + u128::from(secs) * 1_000_000_000,
        port: db.config().get_ports()[0],
    };
    let mut pool = Vec::new();
    for w in 0..workers {
        pool.push(run.spawn(format!("w{w}")).await);
    }
    let mut f = Faults::default();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut spawned = workers;
    // The heavy faults in turn, a second apart, each on the worker that
    // leads (any worker when nobody does); in between, a candidate's
    // backend is terminated every 20-120 ms, every other time the leader's.
    let heavy = ["black_hole", "stop", "fast", "kill", "immediate"];
    let gap = 1_000_000_000;
    let mut next_heavy = now_ns() + gap;
    let mut h = 0;
    while now_ns() + 3_500_000_000 < run.until {
        if now_ns() >= next_heavy {
            let leads = leader(&db).await.map(|(_, name)| name);
            let victim = pool
                .iter()
                .position(|w| Some(&w.name) == leads.as_ref())
                .unwrap_or((rng.next() % pool.len() as u64) as usize);
            let pid = Pid::from_raw(pool[victim].child.id() as i32);
            match heavy[h % heavy.len()] {
                "black_hole" => {
                    pool[victim].proxy.set_mode(ProxyMode::BlackHole);
                    tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
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
                    pool[victim] = run.spawn(format!("w{spawned}")).await;
                    spawned += 1;
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
        let target = if rng.next() & 1 == 0 {
            leader(&db).await
        } else {
            None
        };
        let Ok(client) = db.connect().await else {
            continue;
        };
        let row = match target {
            Some((pid, _)) => {
                client
                    .query_one("SELECT pg_terminate_backend($1)::int::int8", &[&pid])
                    .await
            }
            None => {
                client
                    .query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM \
                         pg_stat_activity WHERE application_name LIKE 'eventsource/el-%' \
                         ORDER BY random() LIMIT 1) t",
                        &[],
                    )
                    .await
            }
        };
        let n = row.map(|r| r.get::<_, i64>(0)).unwrap_or(0);
        f.terminated += n;
        f.leader_terminated += if target.is_some() { n } else { 0 };
    }
    for mut w in pool {
        let status = tokio::task::spawn_blocking(move || w.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "a candidate failed: {status}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let v = check(&text);
    let tenures = tenures(&text);
    let distinct: HashSet<i64> = tenures.iter().map(|t| t.1).collect();
    let sum = |i: usize| -> u64 {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(' ').nth(i).unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let a = audit(&db.connect().await.unwrap()).await;
    eprintln!(
        "election checker{}: {workers} processes x {tasks} tasks, {secs} s, lease {LEASE:?}: \
         {} tenures ({} with a loss), {} terms; write attempts: {} committed, {} refused as \
         fenced, {} failed; faults {f:?}; overlapping tenures: {} told in time, {} told late, \
         {} untold; audit: {} writes accepted in {} terms, stale writes accepted: {}, terms \
         shared by two writers: {}, missing: {}",
        if unfenced() {
            " (control, term check left out)"
        } else {
            ""
        },
        tenures.len(),
        v.losses,
        distinct.len(),
        sum(6),
        sum(7),
        sum(8),
        v.told_before,
        v.told_after.len(),
        v.violations.len(),
        a.writes,
        a.terms,
        a.stale,
        a.shared_terms,
        a.missing,
    );
    assert_eq!(
        distinct.len(),
        tenures.len(),
        "two leaders were given one term"
    );
    assert_eq!(a.missing, 0);
    assert!(a.writes as u64 >= sum(6), "acknowledged writes are missing");
    if unfenced() {
        return;
    }
    assert_eq!(
        a.stale, 0,
        "a deposed leader's write was accepted after a later term's"
    );
    assert!(
        a.strictly_increasing(),
        "terms along the writes: {:?}",
        a.order
    );
    assert_eq!(a.shared_terms, 0, "two writers wrote under one term");
    assert!(
        a.writes > 0 && a.terms > 1,
        "too little happened to prove anything: {a:?}"
    );
    assert!(f.terminated > 0 && f.killed > 0 && f.stopped > 0 && f.black_holes > 0);
    assert!(f.fast_restarts > 0 && f.immediate_restarts > 0, "{f:?}");
}
