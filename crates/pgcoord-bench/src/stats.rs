//! Latency samples, percentiles and the per-scenario aggregate.

use std::time::{Duration, Instant};

/// The measured window of one scenario run: operations that start before
/// `start` are warm-up and not recorded; no operation starts after `end`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

impl Window {
    /// A window that opens after `warmup` and lasts `measure`.
    pub fn after(warmup: Duration, measure: Duration) -> Self {
        let start = Instant::now() + warmup;
        Self {
            start,
            end: start + measure,
        }
    }
}

/// What one worker (task) recorded inside the window.
#[derive(Debug, Default)]
pub struct WorkerOut {
    /// Operations (lock+unlock pairs) completed.
    pub ops: u64,
    /// Latency of each recorded call, in nanoseconds.
    pub lat_ns: Vec<u64>,
    /// When the last recorded operation finished.
    pub last_end: Option<Instant>,
}

impl WorkerOut {
    /// Records one call that started at `t0`, ended at `t1` and did `ops` pairs.
    #[inline]
    pub fn record(&mut self, w: &Window, t0: Instant, t1: Instant, ops: u64) {
        if t0 >= w.start {
            self.ops += ops;
            self.lat_ns.push((t1 - t0).as_nanos() as u64);
            self.last_end = Some(t1);
        }
    }
}

/// Runs `$body` (which may `.await?`) in a loop until the window closes and
/// returns the `WorkerOut`; `$ops` pairs are counted per iteration.
#[macro_export]
macro_rules! timed_loop {
    ($w:expr, $ops:expr, $body:block) => {{
        let w: $crate::stats::Window = $w;
        let mut out = $crate::stats::WorkerOut::default();
        loop {
            let t0 = std::time::Instant::now();
            if t0 >= w.end {
                break;
            }
            $body;
            let t1 = std::time::Instant::now();
            out.record(&w, t0, t1, $ops);
        }
        out
    }};
}

/// The nearest-rank percentile (`p` in 0..=100) of ascending `sorted`; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One scenario's results, summed over its rounds.
#[derive(Debug, Default)]
pub struct Aggregate {
    pub ops: u64,
    pub elapsed: Duration,
    pub lat_ns: Vec<u64>,
    pub round_ops_per_sec: Vec<f64>,
    pub connections: u32,
    pub allocs: u64,
    pub alloc_bytes: u64,
    /// (statements, rows) of advisory-lock SQL over the windows, when known.
    pub statements: Option<(u64, u64)>,
    pub client_cpu_ns: Option<u64>,
    pub server_cpu_ns: Option<u64>,
    /// Per round: the scenario's own figures plus, with several workers,
    /// fairness over them (`task_ops_min`, `task_ops_max`, `jain`).
    pub rounds_extra: Vec<serde_json::Map<String, serde_json::Value>>,
}

impl Aggregate {
    /// Adds one run: the workers' outputs, the window and what was sampled during it.
    pub fn add_run(
        &mut self,
        w: &Window,
        workers: Vec<WorkerOut>,
        connections: u32,
        allocs: (u64, u64),
        mut extra: serde_json::Map<String, serde_json::Value>,
    ) {
        let ops: u64 = workers.iter().map(|o| o.ops).sum();
        if workers.len() > 1 {
            let counts: Vec<u64> = workers.iter().map(|o| o.ops).collect();
            let min = counts.iter().copied().min().unwrap_or(0);
            let max = counts.iter().copied().max().unwrap_or(0);
            extra.insert("task_ops_min".into(), min.into());
            extra.insert("task_ops_max".into(), max.into());
            extra.insert("jain".into(), jain(&counts).into());
        }
        self.rounds_extra.push(extra);
        let last = workers
            .iter()
            .filter_map(|o| o.last_end)
            .max()
            .unwrap_or(w.end);
        let elapsed = last.saturating_duration_since(w.start);
        self.ops += ops;
        self.elapsed += elapsed;
        if elapsed > Duration::ZERO {
            self.round_ops_per_sec
                .push(ops as f64 / elapsed.as_secs_f64());
        }
        for o in workers {
            self.lat_ns.extend(o.lat_ns);
        }
        self.connections = self.connections.max(connections);
        self.allocs += allocs.0;
        self.alloc_bytes += allocs.1;
    }

    pub fn ops_per_sec(&self) -> f64 {
        if self.elapsed.is_zero() {
            0.0
        } else {
            self.ops as f64 / self.elapsed.as_secs_f64()
        }
    }

    /// Sorts the samples; call before the percentiles.
    pub fn finish(&mut self) {
        self.lat_ns.sort_unstable();
    }

    pub fn pct_us(&self, p: f64) -> f64 {
        percentile(&self.lat_ns, p) as f64 / 1000.0
    }
}

/// Jain's fairness index of per-task counts: (sum x)^2 / (n * sum x^2);
/// 1.0 when every task got the same, 1/n when one task got everything.
pub fn jain(counts: &[u64]) -> f64 {
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sq: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    if counts.is_empty() || sq == 0.0 {
        return 0.0;
    }
    sum * sum / (counts.len() as f64 * sq)
}

/// Percentiles of a plain list of durations, in microseconds.
pub fn pct_us_of(samples: &[Duration], p: f64) -> f64 {
    let mut ns: Vec<u64> = samples.iter().map(|d| d.as_nanos() as u64).collect();
    ns.sort_unstable();
    percentile(&ns, p) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        let w = [10, 20, 30];
        assert_eq!(percentile(&w, 50.0), 20);
        assert_eq!(percentile(&w, 99.0), 30);
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[5, 5, 5, 5]), 1.0);
        assert_eq!(jain(&[8, 0, 0, 0]), 0.25);
        assert_eq!(jain(&[]), 0.0);
        assert!((jain(&[1, 3]) - 0.8).abs() < 1e-12);
    }
}
