//! `abandoned`: the dropped-waits scenario. Six tasks of manager A
//! loop `tokio::time::timeout(1-3 ms, a.acquire(key, None))` (releasing at
//! once when they get it) while manager B loops `acquire` + `release` on
//! the same key. Measured: B's pairs/s, against `abandoned_alone` (B alone
//! on a key), and how many sessions A opened.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::DistributedLock;
use serde_json::json;

use crate::ctx::{Ctx, RunOut};
use crate::ours::{app, manager};
use crate::stats::WorkerOut;
use crate::Res;

/// Tasks of manager A abandoning their waits.
const A_TASKS: u64 = 6;

/// How long past the window B's last `acquire` may take before the run is
/// declared stuck (B got nothing: the key passed between abandoned waits).
const B_GRACE: Duration = Duration::from_secs(2);

/// A small xorshift generator: timeouts need variety, not quality.
pub struct Rng(u64);

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        Self((seed ^ 0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

pub async fn abandoned(ctx: &Ctx, round: usize, with_a: bool) -> Res<RunOut> {
    let name = if with_a {
        "abandoned"
    } else {
        "abandoned_alone"
    };
    let key = format!("bench/{name}/{round}");
    let b = manager(ctx, &format!("bench-{name}-b"));
    let a = manager(ctx, &format!("bench-{name}-a"));
    // Warm both managers (sessions open, statements prepared) on other keys.
    for m in [&a, &b] {
        m.acquire(&format!("{key}/warm"), None)
            .await?
            .release()
            .await?;
    }
    let (w, probe) = ctx.start_window(&format!("eventsource/bench-{name}-%"));
    let a_got = Arc::new(AtomicU64::new(0));
    let a_dropped = Arc::new(AtomicU64::new(0));
    let a_max_sessions = Arc::new(AtomicUsize::new(a.session_count()));
    let mut a_tasks = Vec::new();
    if with_a {
        for t in 0..A_TASKS {
            let (a, key, got, dropped) = (a.clone(), key.clone(), a_got.clone(), a_dropped.clone());
            a_tasks.push(tokio::spawn(async move {
                let mut rng = Rng::seeded(round as u64 * 64 + t);
                while Instant::now() < w.end {
                    let budget = Duration::from_micros(1000 + rng.below(2001));
                    match tokio::time::timeout(budget, a.acquire(&key, None)).await {
                        Ok(Ok(g)) => {
                            got.fetch_add(1, Ordering::Relaxed);
                            g.release().await?;
                        }
                        Ok(Err(e)) => return Err(e.into()),
                        Err(_) => {
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Res::Ok(())
            }));
        }
    }
    // A's session count, sampled every millisecond until the window closes,
    // and the server pids of A's sessions every 10 ms: how many distinct
    // sessions A went through (connection churn; a lower bound).
    let a_pattern = app(&format!("bench-{name}-a"));
    let sampler = {
        let (a, max) = (a.clone(), a_max_sessions.clone());
        let (monitor, pattern) = (ctx.monitor.clone(), a_pattern.clone());
        tokio::spawn(async move {
            let mut pids = std::collections::HashSet::new();
            let mut next_pids = Instant::now();
            while Instant::now() < w.end {
                max.fetch_max(a.session_count(), Ordering::Relaxed);
                if with_a && Instant::now() >= next_pids && Instant::now() >= w.start {
                    pids.extend(monitor.pids_like(&pattern).await?);
                    next_pids = Instant::now() + Duration::from_millis(10);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Res::Ok(pids.len())
        })
    };
    let mut a_db_max = 0u32;
    let mut out = WorkerOut::default();
    let mut stuck = false;
    let deadline = tokio::time::Instant::from_std(w.end + B_GRACE);
    loop {
        let t0 = Instant::now();
        if t0 >= w.end {
            break;
        }
        match tokio::time::timeout_at(deadline, b.acquire(&key, None)).await {
            Ok(g) => g?.release().await?,
            Err(_) => {
                stuck = true;
                break;
            }
        }
        let t1 = Instant::now();
        out.record(&w, t0, t1, 1);
        // pg_stat_activity for A every 64 pairs of B (cheap, and B's pace).
        if with_a && out.ops % 64 == 1 {
            a_db_max = a_db_max.max(ctx.monitor.sessions_like(&a_pattern).await?);
        }
    }
    for t in a_tasks {
        t.await??;
    }
    let a_distinct_sessions = sampler.await??;
    if with_a {
        a_db_max = a_db_max.max(ctx.monitor.sessions_like(&a_pattern).await?);
    }
    let a_after = a.session_count();
    let run = RunOut::finish(w, vec![out], probe).await?;
    a.close().await?;
    b.close().await?;
    let mut run = run
        .with("b_stuck", json!(stuck))
        .with("a_acquisitions", json!(a_got.load(Ordering::Relaxed)))
        .with("a_dropped_waits", json!(a_dropped.load(Ordering::Relaxed)))
        .with(
            "a_max_sessions",
            json!(a_max_sessions.load(Ordering::Relaxed)),
        )
        .with("a_sessions_after", json!(a_after));
    if with_a {
        run = run
            .with("a_max_sessions_in_db", json!(a_db_max))
            .with("a_distinct_sessions_seen", json!(a_distinct_sessions));
    }
    Ok(run)
}
