//! `eventsource demo`: worker processes contending for a few keys, a live
//! status line, a holder killed mid-section, and a checked summary.

pub mod record;
pub mod worker;

mod live;
mod summary;
mod throwaway;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pgcoord::inspect::query_holders;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cli::DemoArgs;
use crate::db::{self, Database};
use crate::signals::Signals;
use crate::{exit, report};
use live::{Live, Status};
use record::{analyze, append, Kind};
use summary::print_summary;
use throwaway::{boot_throwaway, say};

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
    if let Some(url) = &db.url {
        cmd.env("DATABASE_URL", url);
    }
    cmd.stdin(Stdio::null())
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
    let (db, throwaway) = match url {
        Some(url) => match Database::parse(&url) {
            Ok(db) => {
                say(&format!("demo: using database {}", db.shown()));
                (db, None)
            }
            Err(msg) => {
                report!("{msg}");
                return exit::USAGE;
            }
        },
        None => match boot_throwaway(&mut signals).await {
            Ok((db, t)) => (db, Some(t)),
            Err(code) => return code,
        },
    };
    // With a throwaway server the record goes into its directory, which
    // its reaper removes however the demo ends (SIGKILL included).
    let record_dir = throwaway
        .as_ref()
        .and_then(|t| t.cluster.as_ref())
        .map_or_else(std::env::temp_dir, |c| c.dir().to_path_buf());
    let code = run_workers(&args, &db, &mut signals, &record_dir).await;
    drop(throwaway);
    code
}

async fn run_workers(
    args: &DemoArgs,
    db: &Database,
    signals: &mut Signals,
    record_dir: &Path,
) -> i32 {
    let inspector = match db.connect().await {
        Ok(c) => c,
        Err(e) => return db::fail("demo", Some(db), &e),
    };
    let run_id = format!("{:x}", record::now_ns() ^ u64::from(std::process::id()));
    let prefix = format!("demo:{run_id}:k");
    let keys: Vec<String> = (0..args.keys).map(|k| format!("{prefix}{k}")).collect();
    let record_path: PathBuf = record_dir.join(format!(
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
    say(&format!(
        "demo: {} workers contend for {} keys ({}0 ..) for {}s; worker 0 will be killed half-way \
         while it holds a lock",
        args.workers, args.keys, prefix, args.seconds
    ));

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
    if let Err(code) = print_summary(args, &analysis, malformed) {
        return code;
    }
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
