//! `contention`: 4 OS processes x 16 tasks on 4 hot keys, each task
//! looping acquire + release; against the same load through sqlx
//! (`contention_sqlx`: each task takes a pooled connection and runs
//! `pg_advisory_lock` / `pg_advisory_unlock` through `PgAdvisoryLock`).
//!
//! The workers are this binary, started with `--contention-worker` and
//! their spec in the environment (`child.rs`; like the CLI demo and the exclusion checker start theirs). They share
//! the window by wall-clock time and print their results as one JSON line.
//! Reported: hand-overs/s (acquisitions of the hot keys), wait p50 / p99
//! (the `acquire` call), sessions per process (`pg_stat_activity`, sampled
//! through the window) and fairness over the 64 tasks (see `stats.rs`).

use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::ctx::{Ctx, RunOut};
use crate::stats::WorkerOut;
use crate::Res;

pub const PROCESSES: usize = 4;
pub const TASKS: usize = 16;
pub const KEYS: usize = 4;

/// Extra lead before the window for the worker processes to start and connect.
const STARTUP: Duration = Duration::from_millis(1200);
/// How long after the window a worker may take to finish before it is killed.
const OVERRUN: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Impl {
    Ours,
    Sqlx,
}

/// What a worker process is told.
#[derive(Debug, Serialize, Deserialize)]
pub struct Spec {
    pub imp: Impl,
    pub url: String,
    /// The run's transport (the worker pins the URL's `sslmode` to it).
    pub transport: crate::transport::Transport,
    pub app: String,
    pub tasks: usize,
    pub keys: Vec<String>,
    pub start_unix_ns: u64,
    pub measure_ns: u64,
    pub batched_sessions: Option<usize>,
}

/// What one task of a worker recorded (times relative to the window start).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TaskReport {
    pub ops: u64,
    pub waits_ns: Vec<u64>,
    pub last_end_ns: Option<u64>,
}

/// What a worker process prints.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct WorkerReport {
    pub tasks: Vec<TaskReport>,
    pub cpu_ns: Option<u64>,
    /// The manager's own `session_count()`, max over the window (ours only).
    pub max_sessions: Option<usize>,
    /// How long before the window the worker was connected and ready (ms;
    /// negative: it started late, and missed part of the window).
    pub ready_lead_ms: f64,
}

pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn app_of(imp: Impl, process: usize) -> String {
    match imp {
        Impl::Ours => format!("eventsource/bench-contention-p{process}"),
        Impl::Sqlx => format!("bench/contention_sqlx-p{process}"),
    }
}

pub async fn contention(ctx: &Ctx, round: usize, imp: Impl) -> Res<RunOut> {
    let name = match imp {
        Impl::Ours => "contention",
        Impl::Sqlx => "contention_sqlx",
    };
    let pattern = match imp {
        Impl::Ours => "eventsource/bench-contention-p%",
        Impl::Sqlx => "bench/contention_sqlx-p%",
    };
    let keys: Vec<String> = (0..KEYS)
        .map(|k| format!("bench/{name}/{round}/{k}"))
        .collect();
    let (w, probe) = ctx.start_window_after(ctx.warmup + STARTUP, pattern);
    let start_unix_ns =
        unix_ns() + w.start.saturating_duration_since(Instant::now()).as_nanos() as u64;
    let exe = std::env::current_exe()?;
    let mut children = Vec::with_capacity(PROCESSES);
    for p in 0..PROCESSES {
        let spec = Spec {
            imp,
            url: ctx.url.clone(),
            transport: ctx.transport,
            app: app_of(imp, p),
            tasks: TASKS,
            keys: keys.clone(),
            start_unix_ns,
            measure_ns: (w.end - w.start).as_nanos() as u64,
            batched_sessions: ctx.batched_sessions,
        };
        let child = crate::child::command(&exe, "--contention-worker", &spec)?
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        children.push(child);
    }
    // Sessions of each process, sampled through the window.
    let mut per_process = vec![0u32; PROCESSES];
    tokio::time::sleep_until(w.start.into()).await;
    while Instant::now() < w.end {
        for (p, max) in per_process.iter_mut().enumerate() {
            *max = (*max).max(ctx.monitor.sessions_like(&app_of(imp, p)).await?);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut reports = Vec::with_capacity(PROCESSES);
    for (p, mut child) in children.into_iter().enumerate() {
        let mut stdout = child.stdout.take().ok_or("worker stdout not piped")?;
        let stderr = child.stderr.take().ok_or("worker stderr not piped")?;
        // Read while it runs, so a chatty worker never blocks on the pipe.
        let said = tokio::spawn(async move {
            let mut text = String::new();
            let _ = tokio::io::BufReader::new(stderr)
                .read_to_string(&mut text)
                .await;
            text
        });
        let mut text = String::new();
        let limit = tokio::time::Instant::from_std(w.end + OVERRUN);
        let read = tokio::time::timeout_at(limit, stdout.read_to_string(&mut text)).await;
        let status = tokio::time::timeout_at(limit, child.wait()).await;
        let failed = match (read, status) {
            (Ok(Ok(_)), Ok(Ok(st))) if st.success() => None,
            (_, Ok(Ok(st))) => Some(format!("exited with {st}")),
            _ => {
                // Its stderr ends once it is gone.
                let _ = child.kill().await;
                Some(format!(
                    "did not finish within {} s of the window's end",
                    OVERRUN.as_secs()
                ))
            }
        };
        if let Some(how) = failed {
            let said = said.await.unwrap_or_default();
            return Err(format!("{name}: worker {p} {how}{}", worker_error(&said)).into());
        }
        let line = text.lines().last().unwrap_or_default();
        let report: WorkerReport = serde_json::from_str(line)
            .map_err(|e| format!("{name}: worker {p} printed {line:?}: {e}"))?;
        reports.push(report);
    }
    let mut workers = Vec::with_capacity(PROCESSES * TASKS);
    let mut children_cpu = Some(0u64);
    let mut manager_max = Vec::with_capacity(PROCESSES);
    let mut ready_lead_ms = Vec::with_capacity(PROCESSES);
    let mut process_ops = Vec::with_capacity(PROCESSES);
    for r in reports {
        ready_lead_ms.push((r.ready_lead_ms * 10.0).round() / 10.0);
        process_ops.push(r.tasks.iter().map(|t| t.ops).sum::<u64>());
        children_cpu = children_cpu.zip(r.cpu_ns).map(|(a, b)| a + b);
        manager_max.push(r.max_sessions);
        for t in r.tasks {
            workers.push(WorkerOut {
                ops: t.ops,
                lat_ns: t.waits_ns,
                last_end: t.last_end_ns.map(|ns| w.start + Duration::from_nanos(ns)),
            });
        }
    }
    let mut run = RunOut::finish(w, workers, probe).await?;
    run.sampled.client_cpu_ns = run
        .sampled
        .client_cpu_ns
        .zip(children_cpu)
        .map(|(a, b)| a + b);
    let max = per_process.iter().copied().max().unwrap_or(0);
    Ok(run
        .with("sessions_per_process", json!(per_process))
        .with("max_sessions_per_process", json!(max))
        .with("manager_session_count_max", json!(manager_max))
        .with("worker_ready_lead_ms", json!(ready_lead_ms))
        .with("process_ops", json!(process_ops)))
}

/// What a failed worker said on standard error, for the scenario's error:
/// its `Error: ...` line (or its last line), after ": ".
fn worker_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines
        .iter()
        .rev()
        .find(|l| l.starts_with("Error: "))
        .or(lines.last())
    {
        Some(l) => format!(": {}", l.trim_start_matches("Error: ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::worker_error;

    #[test]
    fn a_workers_own_error_is_passed_on() {
        let said =
            "note: x\nError: error connecting to server: Connection refused (os error 111)\n";
        assert_eq!(
            worker_error(said),
            ": error connecting to server: Connection refused (os error 111)"
        );
        assert_eq!(worker_error("panicked at x\n"), ": panicked at x");
        assert_eq!(worker_error(""), "");
    }
}
