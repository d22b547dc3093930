//! Every workload in one run: [`run_all`] and its [`Figures`].

use std::time::Duration;

use pgcoord::DistributedLock;
use pgcoord::{postgres::PostgresLockManagerBuilder, PostgresLockManager};
use serde::Serialize;

use super::LockTableRoom;
use super::{concurrent_pairs, handover, lock_table_room, percentile_us, sequential_pairs};

/// The one key the fenced run uses, every time: the fence table keeps a
/// row per key ever fenced, so a fixed key adds one row once, not one per run.
pub const FENCED_KEY: &str = "eventsource/lock-bench/fenced";

/// How many server sessions [`run_all`] has open at once, at most: the
/// caller's `client`, the first manager's lock and inspection sessions,
/// the second's lock session and the session its queued wait takes, and
/// the fenced manager's lock session. A role's `CONNECTION LIMIT` (or the
/// database's) below this fails the run with "too many connections".
pub const SESSIONS_AT_ONCE: usize = 6;

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    /// Seconds each throughput workload ran.
    pub seconds_per_workload: f64,
    /// Lock + unlock pairs per second, one task, one key.
    pub sequential_pairs_per_sec: f64,
    /// Lock + unlock pairs per second, 64 tasks of one manager, a key each.
    pub concurrent64_pairs_per_sec: f64,
    /// Hand-overs measured.
    pub handovers: usize,
    /// Hand-over latency, median, µs.
    pub handover_p50_us: f64,
    /// Hand-over latency, 99th percentile, µs.
    pub handover_p99_us: f64,
    /// Pairs per second with fencing tokens (one task, one key); `None`
    /// when the fencing table is not installed (`eventsource lock install`).
    pub fenced_pairs_per_sec: Option<f64>,
    /// What fencing adds to each grant, µs (fenced pair time minus
    /// unfenced pair time); `None` without the fencing table.
    pub fenced_grant_extra_us: Option<f64>,
    /// Why the fenced figures are `None`, in a few words: no fencing
    /// table, a role that may not write its rows (SQLSTATE 42501), a
    /// read-only session (25006); `None` when they were measured.
    pub fenced_not_measured: Option<String>,
    /// The server's lock-table room.
    pub lock_table: LockTableRoom,
}

/// Which workload is starting (for a progress line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Sequential pairs.
    Sequential,
    /// 64-task pairs.
    Concurrent,
    /// Hand-overs.
    Handover,
    /// Fenced pairs.
    Fenced,
}

impl Phase {
    /// What the phase measures, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Sequential => "sequential lock + unlock pairs",
            Phase::Concurrent => "64 tasks' lock + unlock pairs",
            Phase::Handover => "hand-overs between two managers",
            Phase::Fenced => "fenced lock + unlock pairs",
        }
    }
}

/// Runs every workload for `window` each, on managers built from
/// `builder` (with holder ids `lock-bench-*`), on keys under a prefix
/// unique to the run, and reads the lock-table settings on `client`.
/// Every manager is closed before it returns, on success or failure. The
/// fenced workload runs when the fencing table exists (else its figures
/// are `None`).
///
/// # Cancel safety
///
/// Not cancel safe (the figures so far are lost); leak-free: the
/// managers close their sessions when dropped, and every guard is
/// released with them.
pub async fn run_all(
    builder: impl Fn() -> PostgresLockManagerBuilder,
    client: &tokio_postgres::Client,
    window: Duration,
    mut progress: impl FnMut(Phase),
) -> pgcoord::Result<Figures> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let prefix = format!("eventsource/lock-bench/{run}");
    let lock_table = lock_table_room(client).await?;
    let managers = [
        builder().holder_id("lock-bench-a").build()?,
        builder().holder_id("lock-bench-b").build()?,
        builder()
            .holder_id("lock-bench-fenced")
            .fencing(true)
            .build()?,
    ];
    let out = workloads(&managers, &prefix, window, &mut progress, lock_table).await;
    for m in &managers {
        let _ = m.close().await;
    }
    out
}

async fn workloads(
    [a, b, fenced]: &[PostgresLockManager; 3],
    prefix: &str,
    window: Duration,
    progress: &mut impl FnMut(Phase),
    lock_table: LockTableRoom,
) -> pgcoord::Result<Figures> {
    progress(Phase::Sequential);
    let sequential = sequential_pairs(a, &format!("{prefix}/seq"), window).await?;
    progress(Phase::Concurrent);
    let concurrent = concurrent_pairs(a, &format!("{prefix}/conc"), 64, window).await?;
    progress(Phase::Handover);
    let samples = handover(a, b, &format!("{prefix}/handover"), window).await?;
    progress(Phase::Fenced);
    let (fenced_rate, fenced_not_measured) =
        match sequential_pairs(fenced, FENCED_KEY, window).await {
            Ok(rate) => (Some(rate), None),
            Err(e) => (None, Some(fenced_skipped(&e).ok_or(e)?)),
        };
    debug_assert!(!a.is_held(FENCED_KEY));
    Ok(Figures {
        seconds_per_workload: window.as_secs_f64(),
        sequential_pairs_per_sec: sequential,
        concurrent64_pairs_per_sec: concurrent,
        handovers: samples.len(),
        handover_p50_us: percentile_us(&samples, 50.0),
        handover_p99_us: percentile_us(&samples, 99.0),
        fenced_pairs_per_sec: fenced_rate,
        fenced_grant_extra_us: fenced_rate.map(|f| 1e6 / f - 1e6 / sequential),
        fenced_not_measured,
        lock_table,
    })
}

/// Why the fenced run could not measure, when the database or the role
/// lacks what fencing needs (the other figures stand); `None` for any
/// other failure, which fails the run.
fn fenced_skipped(e: &pgcoord::Error) -> Option<String> {
    use pgcoord::error::BackendErrorKind;
    let backend = e.as_backend()?;
    if backend.kind() == BackendErrorKind::FencingNotInstalled {
        return Some(
            "the fencing table is not installed, or not in a schema of this role's \
             search_path (eventsource lock install)"
                .into(),
        );
    }
    let said = backend.message();
    match backend.code().map(|c| c.code()) {
        Some("42501") => Some(format!(
            "this role may not write the fencing table's rows ({said}, SQLSTATE 42501): fenced \
             locks need SELECT, INSERT and UPDATE on eventsource_lock_fences"
        )),
        Some("25006") => Some(format!(
            "the sessions are read-only ({said}, SQLSTATE 25006; default_transaction_read_only \
             is on for this role or database): a fencing token is a write"
        )),
        _ => None,
    }
}
