//! The chaos checker across failovers: what fencing protects when the
//! primary is replaced by an asynchronous standby that missed its last
//! writes.
//!
//! Several worker processes (fenced managers in lease mode) are given one
//! two-host URL (`target_session_attrs=read-write`, through relays that
//! follow the servers' roles) and take a few hot keys; in each critical
//! section a task does a read-modify-write of the key's counter row on a
//! data connection of its own (same URL), checked with `fencing::check` in
//! that transaction, on whichever server is the primary then. Half the
//! tasks stop writing when their loss signal fires; the other half never
//! look at it. Meanwhile the parent terminates lock backends, restarts the
//! primary (fast and immediate) and promotes the standby after cutting its
//! WAL receiver (so the promotion loses the last grants and writes), the
//! old primary either killed or left running but cut off from everyone.
//!
//! Each promotion also replays, deterministically, the straggler the
//! epoch exists for: a holder granted a key on the old primary after
//! replication stopped presents its token, through
//! `eventsource_lock_fence_check_key` in its transaction on the new
//! primary, right after another holder got the key there; a new standby is
//! then started for the next round.
//!
//! The database audit (`failover_support::writes`) counts **stale writes
//! accepted** and **lost updates**; both must be 0, after every promotion
//! and at the end. The control run replaces `eventsource_lock_epoch()` by
//! 0 on the servers (the behaviour before tokens had an epoch): there the
//! straggler's write must be accepted and both counts must grow with every
//! promotion, which shows that the audit can fail.
//!
//! `EVENTSOURCE_STRESS=1` runs three times the faults with more workers
//! (`EVENTSOURCE_STRESS_WORKERS`, `EVENTSOURCE_STRESS_TASKS`).

use crate::{checker_support, common, failover_support, fault_support};
use std::cell::Cell;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use checker_support::*;
use failover_support::faults::{terminations, Faults, StopFile};
use failover_support::servers::{connect, Promotion, Servers};
use failover_support::writes::{self, audit, Audit, Outcome};
use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;
use pgcoord_testkit::pg::StopMode;

const LEASE: Duration = Duration::from_secs(2);
const STRAGGLER: &str = "fx:straggler";
const SECS: Duration = Duration::from_secs(30);

fn leased(url: &str, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(holder)
        .fencing(true)
        .lease(LEASE)
        .liveness_interval(Duration::from_millis(100))
        .liveness_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// Whether the worker should stop: the parent says so, or is gone.
fn stopping(stop: &std::path::Path) -> bool {
    stop.exists() || std::os::unix::process::parent_id() == 1
}

/// Opens a data connection, retrying while no server accepts writes.
async fn data_client(url: &str, stop: &std::path::Path) -> Option<tokio_postgres::Client> {
    while !stopping(stop) {
        // tokio-postgres bounds only the TCP connect by `connect_timeout`:
        // a host that accepts and never answers would hold it for ever.
        let attempt = tokio_postgres::connect(url, tokio_postgres::NoTls);
        if let Ok(Ok((client, conn))) = tokio::time::timeout(Duration::from_secs(3), attempt).await
        {
            tokio::spawn(conn);
            return Some(client);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// A protected write, bounded: a data connection cut off with the old
/// primary would hang.
async fn timed_write(
    client: &mut tokio_postgres::Client,
    guard: &pgcoord::LockGuard,
    work: Duration,
) -> Outcome {
    tokio::time::timeout(
        Duration::from_secs(5),
        writes::protected_write(client, guard, work),
    )
    .await
    .unwrap_or(Outcome::Error)
}

/// One worker process (run by the tests below as a child); ignored in a
/// normal run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the failover chaos tests"]
async fn failover_chaos_worker() {
    let url = std::env::var("ES_FX_URL").expect("ES_FX_URL: run by the failover chaos test");
    let var = |n: &str| std::env::var(n).unwrap();
    let (worker, log, stop) = (var("ES_FX_WORKER"), var("ES_FX_LOG"), var("ES_FX_STOP"));
    let stop = std::path::PathBuf::from(stop);
    let keys: u64 = var("ES_FX_KEYS").parse().unwrap();
    let tasks: u64 = var("ES_FX_TASKS").parse().unwrap();
    let m = leased(&url, &format!("fx-{worker}"));
    let file = Arc::new(Mutex::new(
        std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
    ));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (m, file, url, stop) = (m.clone(), file.clone(), url.clone(), stop.clone());
        let name = format!("{worker}.{t}");
        handles.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((std::process::id() as u64) << 8 | t) | 1);
            let mut errors = 0u64;
            let careless = t % 2 == 1;
            let mut data = data_client(&url, &stop).await;
            while !stopping(&stop) {
                let Some(client) = data.as_mut() else { break };
                let key = format!("fx:hot:{}", rng.next() % keys);
                let Ok(guard) = m.acquire(&key, Some(Duration::from_secs(5))).await else {
                    errors += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let enter = now_ns();
                let work = Duration::from_micros(200 + rng.next() % 300);
                let (outcome, lost_at) = if careless {
                    tokio::time::sleep(work * 4).await;
                    (timed_write(client, &guard, work).await, None)
                } else {
                    tokio::select! {
                        o = timed_write(client, &guard, work) => (o, None),
                        _ = guard.lost() => (Outcome::Error, Some(now_ns())),
                    }
                };
                let exit = now_ns();
                let lost_at = match (lost_at, guard.release().await) {
                    (Some(t), _) => Some(t),
                    (None, Err(e)) if e.is_lock_lost() => Some(now_ns()),
                    (None, _) => None,
                };
                let loss = lost_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
                let outcome = if lost_at.is_some() && outcome == Outcome::Error {
                    "lost"
                } else {
                    outcome.as_str()
                };
                let line = format!("{name} {key} {enter} {exit} {loss} {outcome}\n");
                file.lock().unwrap().write_all(line.as_bytes()).unwrap();
                if (outcome != "committed" && outcome != "refused") || client.is_closed() {
                    data = data_client(&url, &stop).await;
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

/// One step of a run's plan (between steps: a second of terminations).
#[derive(Debug, Clone, Copy)]
enum Step {
    Restart(StopMode),
    Promote(Promotion),
}

/// The straggler of one promotion: granted on the old primary after
/// replication stopped (`token`), it writes on the new primary just after a
/// holder there (`fresh`) has read the key's counter and written it. Returns
/// the straggler's outcome and the fresh holder's.
async fn straggler_writes(servers: &Servers, db: &str, token: u64) -> (Outcome, Outcome) {
    let fresh = leased(&servers.url(db), "straggler-new");
    let guard = loop {
        if let Ok(g) = fresh.acquire(STRAGGLER, Some(SECS)).await {
            break g;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut late = connect(&servers.primary.url(db)).await;
    let mut current = connect(&servers.primary.url(db)).await;
    let fresh_outcome = Cell::new(None);
    let meanwhile = async {
        let o = writes::protected_write(&mut current, &guard, Duration::ZERO).await;
        fresh_outcome.set(Some(o));
    };
    let late_outcome = writes::sql_checked_write(&mut late, STRAGGLER, token, meanwhile).await;
    let fresh_outcome = match fresh_outcome.get() {
        Some(o) => o,
        None => writes::protected_write(&mut current, &guard, Duration::ZERO).await,
    };
    guard.release().await.unwrap();
    fresh.close().await.unwrap();
    (late_outcome, fresh_outcome)
}

/// Runs `plan` with the epoch (or, `control`, without it); asserts the
/// audit after every promotion and at the end.
async fn run(plan: &[Step], control: bool) {
    let (cluster, db) = fault_support::private_db(&[]).await;
    let workers = env_or("EVENTSOURCE_STRESS_WORKERS", 3, 6);
    let tasks = env_or("EVENTSOURCE_STRESS_TASKS", 2, 3);
    let keys = 2;
    let setup = db.connect().await.unwrap();
    setup.batch_execute(writes::SCHEMA).await.unwrap();
    setup
        .batch_execute(&format!(
            "INSERT INTO fx_protected SELECT 'fx:hot:' || i, 0 FROM generate_series(0, 9) i; \
             INSERT INTO fx_protected VALUES ('{STRAGGLER}', 0)"
        ))
        .await
        .unwrap();
    common::manager(&db, "installer")
        .install_fencing()
        .await
        .unwrap();
    if control {
        // Before the standby's base backup, so that it has it too.
        setup
            .batch_execute(
                "CREATE OR REPLACE FUNCTION eventsource_lock_epoch() RETURNS bigint \
                 LANGUAGE sql STABLE AS 'SELECT 0::bigint'",
            )
            .await
            .unwrap();
    }
    drop(setup);
    let mut servers = Servers::start(cluster).await;
    let url = servers.url(db.name());
    let dir = std::env::temp_dir().join(format!("eventsource-fx-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let (log, stop) = (dir.join("sections.log"), dir.join("stop"));
    std::fs::write(&log, "").unwrap();
    let _stop_on_panic = StopFile(stop.clone());
    let pool: Vec<Child> = (0..workers)
        .map(|w| {
            Command::new(std::env::current_exe().unwrap())
                .args(common::worker_args(module_path!(), "failover_chaos_worker"))
                .env("ES_FX_URL", &url)
                .env("ES_FX_WORKER", format!("w{w}"))
                .env("ES_FX_LOG", &log)
                .env("ES_FX_STOP", &stop)
                .env("ES_FX_KEYS", keys.to_string())
                .env("ES_FX_TASKS", tasks.to_string())
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut f = Faults::default();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut last = Audit::default();
    let second = Duration::from_secs(1);
    for step in plan {
        terminations(&servers.primary.url(db.name()), second, &mut rng, &mut f).await;
        match *step {
            Step::Restart(mode) => {
                let p = servers.primary.clone();
                tokio::task::spawn_blocking(move || p.restart(mode))
                    .await
                    .unwrap()
                    .unwrap();
                f.restarts += 1;
            }
            Step::Promote(how) => {
                servers.cut_replication(db.name()).await;
                // The workers go on; what they do now, the promotion loses.
                let primary_url = servers.primary.url(db.name());
                terminations(&primary_url, second / 2, &mut rng, &mut f).await;
                let old = leased(&primary_url, "straggler-old");
                let g = old.acquire(STRAGGLER, Some(SECS)).await.unwrap();
                let token = g.fence().unwrap();
                servers.fail_over(how, db.name()).await;
                let (late, fresh) = straggler_writes(&servers, db.name(), token).await;
                drop(g);
                let _ = tokio::time::timeout(Duration::from_secs(5), old.close()).await;
                match how {
                    Promotion::Killed => f.killed_promotions += 1,
                    Promotion::CutOff => f.cut_off_promotions += 1,
                }
                let now = audit(&mut connect(&servers.primary.url(db.name())).await).await;
                eprintln!(
                    "after a {how:?} promotion: straggler {late:?}, holder {fresh:?}, {now:?}"
                );
                assert_eq!(fresh, Outcome::Committed, "the current holder's write");
                if control {
                    assert_eq!(
                        late,
                        Outcome::Committed,
                        "without the epoch the stale token passes"
                    );
                    assert!(
                        now.stale_accepted > last.stale_accepted
                            && now.lost_updates > last.lost_updates,
                        "the control's damage must show in the audit: {last:?} then {now:?}"
                    );
                } else {
                    assert_eq!(
                        late,
                        Outcome::Refused,
                        "a pre-failover token on the new primary"
                    );
                    assert_eq!((now.stale_accepted, now.lost_updates), (0, 0), "{now:?}");
                }
                last = now;
            }
        }
    }
    terminations(&servers.primary.url(db.name()), second, &mut rng, &mut f).await;
    std::fs::write(&stop, "").unwrap();
    for mut w in pool {
        let status = tokio::task::spawn_blocking(move || w.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "a worker failed: {status}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let v = check(&text);
    let count = |o: &str| {
        text.lines()
            .filter(|l| l.ends_with(&format!(" {o}")))
            .count()
    };
    let end = audit(&mut connect(&servers.primary.url(db.name())).await).await;
    eprintln!(
        "failover chaos checker{}: {workers} processes x {tasks} tasks, {keys} keys, lease \
         {LEASE:?}: {} critical sections ({} committed, {} refused as fenced, {} lost mid-section, \
         {} failed), faults {f:?}; overlaps: {} told in time, {} told late, {} untold; audit: {} \
         protected writes, stale writes accepted: {}, lost updates: {}",
        if control {
            " (control, epoch left out)"
        } else {
            ""
        },
        v.sections,
        count("committed"),
        count("refused"),
        count("lost"),
        count("error"),
        v.told_before,
        v.told_after.len(),
        v.violations.len(),
        end.writes,
        end.stale_accepted,
        end.lost_updates,
    );
    assert!(
        end.writes > 0,
        "no protected write committed: the run proves nothing"
    );
    if !control {
        assert_eq!((end.stale_accepted, end.lost_updates), (0, 0), "{end:?}");
        assert!(
            count("committed") > 0 && f.terminated > 0 && f.restarts > 0,
            "{f:?}"
        );
    }
}

fn plan(rounds: u64) -> Vec<Step> {
    let one = [
        Step::Restart(StopMode::Fast),
        Step::Promote(Promotion::Killed),
        Step::Restart(StopMode::Immediate),
        Step::Promote(Promotion::CutOff),
    ];
    (0..rounds).flat_map(|_| one).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_stay_ordered_across_promotions() {
    run(&plan(env_or("EVENTSOURCE_STRESS_ROUNDS", 1, 3)), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_epoch_the_audit_catches_the_stale_writes() {
    let promotions = [
        Step::Promote(Promotion::Killed),
        Step::Promote(Promotion::CutOff),
    ];
    run(&promotions, true).await;
}
