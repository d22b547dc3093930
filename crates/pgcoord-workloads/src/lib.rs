//! The lock workloads that `eventsource lock bench` runs on a user's own
//! server and that the benchmark crate (`pgcoord-bench`, scenario
//! `lock_bench`) runs on its throwaway cluster: one implementation for
//! both, with no dependency beyond the library and its driver (no sqlx, no
//! plotting), so the CLI can take it.
//!
//! Every workload runs on lock managers the caller builds (any role that
//! may connect will do: advisory locks need no privilege), on keys unique
//! to the run, and closes nothing of the caller's; it creates no table.

mod figures;
mod handover;
mod pairs;
mod room;

pub use figures::{run_all, Figures, Phase, SESSIONS_AT_ONCE};
pub use handover::handover;
pub use pairs::{concurrent_pairs, sequential_pairs};
pub use room::{lock_table_room, LockTableRoom};

/// Percentile `p` (0-100) of `samples` in microseconds; 0 when empty.
pub fn percentile_us(samples: &[std::time::Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (us.len() - 1) as f64).round() as usize;
    us[rank.min(us.len() - 1)]
}
