//! `eventsource demo`: worker processes contending for a few keys, a live
//! status line, a holder killed mid-section, and a checked summary.

pub mod record;
pub mod worker;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use eventsource::adapters::postgres::query_holders;
use eventsource_testkit::pg::{TestCluster, TestDatabase};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cli::DemoArgs;
use crate::db::{self, Database};
use crate::signals::Signals;
use crate::{exit, report};
use record::{analyze, append, percentile, Kind};

/// How long the status line waits between refreshes on a terminal, and
/// between printed lines otherwise.
const TTY_REFRESH: Duration = Duration::from_millis(200);
const LOG_REFRESH: Duration = Duration::from_secs(2);
/// Extra time the workers get past --seconds before they are killed.
const OVERRUN: Duration = Duration::from_secs(60);

/// Messages from the workers' stdout.
#[derive(Debug)]
enum WorkerLine {
    Line(u32, String),
    Closed,
}

/// The live view the status line shows.
#[derive(Debug, Default)]
struct Live {
    acquisitions: u64,
    /// Per key: holder (worker id) and how many wait, as PostgreSQL sees it.
    db_view: BTreeMap<String, (Option<String>, usize)>,
    running: usize,
    killed: Option<(u32, String)>,
}

fn short_key(key: &str) -> &str {
    key.rsplit(':').next().unwrap_or(key)
}

fn short_holder(holder_id: &str) -> String {
    holder_id
        .strip_prefix("demo-worker-")
        .map(|n| format!("w{n}"))
        .unwrap_or_else(|| holder_id.to_owned())
}

impl Live {
    /// Reads each key's holder and queue from PostgreSQL (bounded; on
    /// failure the previous view stays).
    async fn refresh(&mut self, inspector: &tokio_postgres::Client, keys: &[String]) {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        if let Ok(Ok(locks)) =
            tokio::time::timeout(Duration::from_secs(1), query_holders(inspector, &refs)).await
        {
            self.db_view = locks
                .into_iter()
                .filter_map(|l| {
                    let holder = l.holders.first().map(|h| {
                        h.holder_id
                            .clone()
                            .unwrap_or_else(|| format!("pid {}", h.pid))
                    });
                    Some((l.key?, (holder, l.waiters.len())))
                })
                .collect();
        }
    }

    fn line(&self, elapsed: Duration, keys: &[String]) -> String {
        let mut parts = vec![format!(
            "[{:5.1}s] {} acquisitions",
            elapsed.as_secs_f64(),
            self.acquisitions
        )];
        let keys: Vec<String> = keys
            .iter()
            .map(|k| match self.db_view.get(k) {
                Some((Some(holder), waiting)) => {
                    format!(
                        "{}: {} +{} waiting",
                        short_key(k),
                        short_holder(holder),
                        waiting
                    )
                }
                Some((None, waiting)) => format!("{}: - +{} waiting", short_key(k), waiting),
                None => format!("{}: free", short_key(k)),
            })
            .collect();
        parts.push(keys.join(", "));
        parts.push(format!("{} workers running", self.running));
        if let Some((w, k)) = &self.killed {
            parts.push(format!("w{w} killed on {}", short_key(k)));
        }
        parts.join(" | ")
    }
}

/// The status line: redrawn in place on a terminal, printed every few
/// seconds otherwise.
#[derive(Debug)]
struct Status {
    tty: bool,
    drawn: bool,
}

impl Status {
    fn show(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.drawn = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }

    /// Prints a line of its own without garbling the status line.
    fn note(&mut self, line: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty && self.drawn {
            let _ = write!(err, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.tty && self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
    }
}

/// A throwaway server, removed when dropped.
#[derive(Debug)]
struct Throwaway {
    database: Option<TestDatabase>,
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        if let Some(db) = self.database.take() {
            // Dropping the last handle stops the cluster and removes its directory.
            drop(db);
            eprintln!("demo: stopped and removed the throwaway PostgreSQL");
        }
    }
}

async fn boot_throwaway() -> Result<(Database, Throwaway), eventsource::Error> {
    eprintln!("demo: no database URL given; starting a throwaway PostgreSQL (initdb, pg_ctl) ...");
    let cluster = tokio::task::spawn_blocking(TestCluster::start)
        .await
        .map_err(|e| eventsource::Error::InvalidArgument(e.to_string()))??;
    eprintln!(
        "demo: PostgreSQL listening on 127.0.0.1:{} in {}",
        cluster.port(),
        cluster.dir().display()
    );
    let database = TestDatabase::create_on(Arc::new(cluster)).await?;
    let db = Database::parse(&database.url()).map_err(eventsource::Error::InvalidArgument)?;
    Ok((
        db,
        Throwaway {
            database: Some(database),
        },
    ))
}

fn spawn_worker(
    exe: &Path,
    db: &Database,
    args: &DemoArgs,
    id: u32,
    prefix: &str,
    record: &Path,
    stall_after_ms: Option<u64>,
) -> std::io::Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.arg("demo-worker")
        .arg("--id")
        .arg(id.to_string())
        .arg("--prefix")
        .arg(prefix)
        .arg("--keys")
        .arg(args.keys.to_string())
        .arg("--millis")
        .arg((u64::from(args.seconds) * 1000).to_string())
        .arg("--record")
        .arg(record);
    if let Some(ms) = stall_after_ms {
        cmd.arg("--stall-after-ms").arg(ms.to_string());
    }
    // The URL goes through the environment, never the command line (`ps`).
    cmd.env("DATABASE_URL", &db.url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    cmd.spawn()
}

/// Runs the demo; returns the exit code.
pub async fn demo(args: DemoArgs, url: Option<String>) -> i32 {
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    let url = url.filter(|u| !u.trim().is_empty());
    let (db, throwaway) =
        match url {
            Some(url) => match Database::parse(&url) {
                Ok(db) => {
                    eprintln!("demo: using database {}", db.shown());
                    (db, None)
                }
                Err(msg) => {
                    report!("{msg}");
                    return exit::USAGE;
                }
            },
            None => {
                let booted = tokio::select! {
                    booted = boot_throwaway() => booted,
                    sig = signals.recv() => return exit::SIGNAL_BASE + sig as i32,
                };
                match booted {
                    Ok((db, t)) => (db, Some(t)),
                    Err(e) => return db::fail(
                        "cannot start a throwaway PostgreSQL (or give the demo a database with \
                         --database-url or DATABASE_URL)",
                        None,
                        &e,
                    ),
                }
            }
        };
    let code = run_workers(&args, &db, &mut signals).await;
    drop(throwaway);
    code
}

async fn run_workers(args: &DemoArgs, db: &Database, signals: &mut Signals) -> i32 {
    let inspector = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("demo", Some(db), &e),
    };
    let run_id = format!("{:x}", record::now_ns() ^ u64::from(std::process::id()));
    let prefix = format!("demo:{run_id}:k");
    let keys: Vec<String> = (0..args.keys).map(|k| format!("{prefix}{k}")).collect();
    let record_path: PathBuf = std::env::temp_dir().join(format!(
        "eventsource-demo-{}-{run_id}.log",
        std::process::id()
    ));
    let code = run_with_record(args, db, signals, &inspector, &prefix, &keys, &record_path).await;
    let _ = std::fs::remove_file(&record_path);
    code
}

#[allow(clippy::too_many_arguments)]
async fn run_with_record(
    args: &DemoArgs,
    db: &Database,
    signals: &mut Signals,
    inspector: &tokio_postgres::Client,
    prefix: &str,
    keys: &[String],
    record_path: &Path,
) -> i32 {
    let mut record_file = match std::fs::OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(record_path)
    {
        Ok(f) => f,
        Err(e) => {
            report!("cannot create {}: {e}", record_path.display());
            return exit::SOFTWARE;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            report!("cannot find this program's path: {e}");
            return exit::SOFTWARE;
        }
    };
    let seconds = Duration::from_secs(u64::from(args.seconds));
    eprintln!(
        "demo: {} workers contend for {} keys ({}0 ..) for {}s; worker 0 will be killed half-way \
         while it holds a lock",
        args.workers, args.keys, prefix, args.seconds
    );

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut children: Vec<(u32, Child, Pid)> = Vec::new();
    for id in 0..args.workers {
        let stall = (id == 0).then(|| u64::from(args.seconds) * 500);
        let mut child = match spawn_worker(&exe, db, args, id, prefix, record_path, stall) {
            Ok(c) => c,
            Err(e) => {
                report!("cannot start worker {id}: {e}");
                return exit::SOFTWARE;
            }
        };
        let pid = Pid::from_raw(child.id().unwrap_or(0) as i32);
        let stdout = child.stdout.take().expect("stdout is piped");
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(WorkerLine::Line(id, line)).is_err() {
                    return;
                }
            }
            let _ = tx.send(WorkerLine::Closed);
        });
        children.push((id, child, pid));
    }
    drop(tx);

    let started = Instant::now();
    let hard_deadline = started + seconds + OVERRUN;
    let tty = std::io::stderr().is_terminal();
    let mut status = Status { tty, drawn: false };
    let mut refresh = tokio::time::interval(if tty { TTY_REFRESH } else { LOG_REFRESH });
    let mut live = Live {
        running: children.len(),
        ..Live::default()
    };
    let mut open_streams = children.len();
    let mut victim: Option<(u32, String)> = None;
    let mut takeover_seen = false;
    let mut worker_failed = false;
    let mut timed_out = false;

    while open_streams > 0 {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(WorkerLine::Line(id, line)) => {
                    let (verb, key) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                    match verb {
                        "enter" => {
                            live.acquisitions += 1;
                            if let Some((v, vkey)) = &victim {
                                if !takeover_seen && *v != id && vkey == key {
                                    takeover_seen = true;
                                    status.note(&format!(
                                        "demo: [{:5.1}s] worker {id} took over {key}",
                                        started.elapsed().as_secs_f64()
                                    ));
                                }
                            }
                        }
                        "stall" if victim.is_none() => {
                            let key = key.to_owned();
                            let waiting = wait_for_waiter(inspector, &key).await;
                            let pid = children.iter().find(|c| c.0 == id).map(|c| c.2);
                            if let Some(pid) = pid {
                                status.note(&format!(
                                    "demo: [{:5.1}s] worker {id} stopped inside its critical section on \
                                     {key} ({waiting} waiting); sending it SIGKILL",
                                    started.elapsed().as_secs_f64()
                                ));
                                // Stamped before the kill: the lock cannot pass
                                // on before the process is dead.
                                let _ = append(&mut record_file, id, Kind::Killed, &key);
                                let _ = kill(pid, Signal::SIGKILL);
                                live.killed = Some((id, key.clone()));
                                victim = Some((id, key));
                            }
                        }
                        _ => {}
                    }
                }
                Some(WorkerLine::Closed) => {
                    open_streams -= 1;
                    live.running = live.running.saturating_sub(1);
                }
                None => break,
            },
            _ = refresh.tick() => {
                live.refresh(inspector, keys).await;
                status.show(&live.line(started.elapsed(), keys));
            }
            sig = signals.recv() => {
                status.finish();
                report!("{}: stopping the workers", sig.as_str());
                for (_, child, _) in &mut children {
                    let _ = child.start_kill();
                }
                return exit::SIGNAL_BASE + sig as i32;
            }
            _ = tokio::time::sleep_until(hard_deadline) => {
                status.finish();
                report!("the workers did not finish in time; killing them");
                worker_failed = true;
                timed_out = true;
                break;
            }
        }
    }
    live.refresh(inspector, keys).await;
    status.show(&live.line(started.elapsed(), keys));
    status.finish();

    // Exit statuses: the victim must have died of SIGKILL, the others exited 0.
    for (id, child, _) in &mut children {
        if timed_out {
            let _ = child.start_kill();
        }
        match child.wait().await {
            Ok(st) => {
                let killed = victim.as_ref().is_some_and(|(v, _)| v == id);
                let ok = if killed {
                    crate::messages::exit_code(st) == exit::SIGNAL_BASE + Signal::SIGKILL as i32
                } else {
                    st.success()
                };
                if !ok {
                    worker_failed = true;
                    report!("worker {id} {}", crate::messages::describe_status(st));
                }
            }
            Err(e) => {
                worker_failed = true;
                report!("cannot wait for worker {id}: {e}");
            }
        }
    }

    let text = match std::fs::read_to_string(record_path) {
        Ok(t) => t,
        Err(e) => {
            report!("cannot read the record {}: {e}", record_path.display());
            return exit::SOFTWARE;
        }
    };
    let (events, malformed) = record::parse(&text);
    let analysis = analyze(events);
    print_summary(args, &analysis, malformed);
    let good = analysis.overlaps.is_empty()
        && !worker_failed
        && analysis.takeover.as_ref().is_some_and(|t| t.next.is_some());
    if good {
        0
    } else {
        1
    }
}

/// Waits (bounded) until someone queues for `key`, so that the kill shows a
/// hand-over to a waiter. Polls: PostgreSQL sends no event for a new waiter.
async fn wait_for_waiter(inspector: &tokio_postgres::Client, key: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(locks) = query_holders(inspector, &[key]).await {
            let waiting = locks.first().map_or(0, |l| l.waiters.len());
            if waiting > 0 || Instant::now() >= deadline {
                return waiting;
            }
        } else if Instant::now() >= deadline {
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

fn print_summary(args: &DemoArgs, a: &record::Analysis, malformed: usize) {
    let mut out = String::new();
    out.push_str(&format!(
        "\nSummary: {} workers, {} keys, {}s\n",
        args.workers, args.keys, args.seconds
    ));
    let per: Vec<String> = a
        .per_worker
        .iter()
        .map(|(w, n)| format!("w{w} {n}"))
        .collect();
    out.push_str(&format!(
        "  acquisitions:                   {} ({})\n",
        a.acquisitions,
        per.join(", ")
    ));
    out.push_str(&format!(
        "  overlapping critical sections:  {} (checked {} sections in the shared enter/exit record{})\n",
        a.overlaps.len(),
        a.acquisitions,
        if malformed > 0 {
            format!("; {malformed} torn lines skipped")
        } else {
            String::new()
        }
    ));
    for o in a.overlaps.iter().take(5) {
        out.push_str(&format!(
            "    OVERLAP on {}: worker {} entered while worker {} was inside\n",
            o.key, o.entered, o.inside
        ));
    }
    match (
        percentile(&a.handovers, 50.0),
        percentile(&a.handovers, 99.0),
    ) {
        (Some(p50), Some(p99)) => out.push_str(&format!(
            "  hand-over latency:              p50 {}, p99 {} ({} hand-overs from a holder's exit \
             to a waiting worker's entry)\n",
            ms(p50),
            ms(p99),
            a.handovers.len()
        )),
        _ => out.push_str(
            "  hand-over latency:              no hand-over to a waiting worker happened\n",
        ),
    }
    match &a.takeover {
        Some(t) => match t.next {
            Some((w, ns)) => out.push_str(&format!(
                "  crash:                          worker {} was SIGKILLed holding {}; PostgreSQL \
                 released the lock and worker {w} entered {} after the kill\n",
                t.victim,
                t.key,
                ms(ns)
            )),
            None => out.push_str(&format!(
                "  crash:                          worker {} was SIGKILLed holding {}; no one took \
                 the key afterwards\n",
                t.victim, t.key
            )),
        },
        None => out.push_str("  crash:                          no worker was killed\n"),
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
}
