//! Scenarios on our lock manager: sequential throughput (`ours_seq`,
//! `ours_try_seq`), hand-over latency
//! (`handoff`), arrival order (`fifo`) and footprint (`capacity`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock, LockRegistry};
use serde_json::{json, Map};
use tokio::sync::mpsc;

use crate::ctx::{Ctx, RunOut, ScenarioReport};
use crate::stats::pct_us_of;
use crate::{alloc, timed_loop, Res};

/// How long to wait for a waiter to show up in `pg_locks` before giving up.
const QUEUE_LIMIT: Duration = Duration::from_secs(10);

pub fn manager(ctx: &Ctx, holder: &str) -> PostgresLockManager {
    manager_with(ctx, holder, false)
}

/// [`manager`], with fencing tokens on or off.
pub fn manager_with(ctx: &Ctx, holder: &str, fencing: bool) -> PostgresLockManager {
    let builder = PostgresLockManager::builder(ctx.options.clone())
        .holder_id(holder)
        .max_held_locks(20_000)
        .fencing(fencing);
    match ctx.batched_sessions {
        Some(n) => builder.batched_sessions(n).build(),
        None => builder.build(),
    }
    .expect("valid bench lock manager settings")
}

pub fn app(holder: &str) -> String {
    format!("eventsource/{holder}")
}

/// `acquire` + `release`, uncontended, one task.
pub async fn ours_seq(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let holder = "bench-ours_seq";
    let mgr = manager(ctx, holder);
    let key = format!("bench/ours_seq/{round}/0");
    let (w, probe) = ctx.start_window(&app(holder));
    let out = timed_loop!(w, 1, {
        let guard = mgr.acquire(&key, None).await?;
        guard.release().await?;
    });
    let run = RunOut::finish(w, vec![out], probe).await;
    mgr.close().await?;
    run
}

/// `try_acquire` + `release(key)`, one task.
pub async fn ours_try_seq(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let holder = "bench-ours_try_seq";
    let mgr = manager(ctx, holder);
    let key = format!("bench/ours_try_seq/{round}/0");
    let (w, probe) = ctx.start_window(&app(holder));
    let out = timed_loop!(w, 1, {
        let info = mgr
            .try_lock(&key)
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))?;
        assert!(info.is_some(), "ours_try_seq: key unexpectedly held");
        mgr.release(&key).await?;
    });
    let run = RunOut::finish(w, vec![out], probe).await;
    mgr.close().await?;
    run
}

/// Two managers on one key: time from the holder's `release()` call to the
/// waiter's `acquire` returning, the waiter being queued inside PostgreSQL.
pub async fn handoff(ctx: &Ctx) -> Res<ScenarioReport> {
    let (warm, trials) = if ctx.quick { (5, 100) } else { (20, 500) };
    let holder = manager(ctx, "bench-handoff-holder");
    let waiter = manager(ctx, "bench-handoff-waiter");
    let mut handoffs = Vec::with_capacity(trials);
    let mut releases = Vec::with_capacity(trials);
    let mut connections = 0;
    let began = Instant::now();
    for trial in 0..warm + trials {
        let key = format!("bench/handoff/{trial}");
        let id = lock_id_for_key(&key);
        let guard = holder.acquire(&key, None).await?;
        let (w, k) = (waiter.clone(), key.clone());
        let task = tokio::spawn(async move {
            let g = w.acquire(&k, None).await?;
            let at = Instant::now();
            Res::Ok((g, at))
        });
        if !ctx.monitor.wait_for_waiters(id, 1, QUEUE_LIMIT).await? {
            return Err(format!("handoff: the waiter never queued on {key}").into());
        }
        if trial == warm {
            connections = ctx
                .monitor
                .sessions_like("eventsource/bench-handoff-%")
                .await?;
        }
        let t0 = Instant::now();
        guard.release().await?;
        let released = t0.elapsed();
        let (g, at) = task.await??;
        if trial >= warm {
            handoffs.push(at.saturating_duration_since(t0));
            releases.push(released);
        }
        g.release().await?;
    }
    let elapsed = began.elapsed();
    holder.close().await?;
    waiter.close().await?;
    let mut extra = Map::new();
    extra.insert("trials".into(), json!(trials));
    // Every hand-over, for the distribution plot (µs, 0.1 µs resolution).
    let mut samples: Vec<f64> = handoffs
        .iter()
        .map(|d| (d.as_nanos() as f64 / 100.0).round() / 10.0)
        .collect();
    samples.sort_by(f64::total_cmp);
    extra.insert("samples_us".into(), json!(samples));
    extra.insert("p90_us".into(), json!(pct_us_of(&handoffs, 90.0)));
    extra.insert("max_us".into(), json!(pct_us_of(&handoffs, 100.0)));
    extra.insert(
        "release_call_p50_us".into(),
        json!(pct_us_of(&releases, 50.0)),
    );
    extra.insert(
        "release_call_p99_us".into(),
        json!(pct_us_of(&releases, 99.0)),
    );
    extra.insert(
        "latency_of".into(),
        json!("holder's release() call to the queued waiter's acquire() returning"),
    );
    Ok(ScenarioReport {
        ops_per_sec: (warm + trials) as f64 / elapsed.as_secs_f64(),
        p50_us: pct_us_of(&handoffs, 50.0),
        p99_us: pct_us_of(&handoffs, 99.0),
        connections,
        extra,
    })
}

/// Waits until `n` tasks of `m` wait in its wait lines; false after [`QUEUE_LIMIT`].
async fn wait_for_line(m: &PostgresLockManager, n: usize) -> bool {
    let deadline = Instant::now() + QUEUE_LIMIT;
    while m.waiting_tasks() < n {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::task::yield_now().await;
    }
    true
}

/// 8 waiters queued on one key in a known order (each started only once
/// the previous one waits in `pg_locks`); the order of service is recorded.
/// `one_manager`: the 8 waiters are tasks of one manager instead of 8 managers.
pub async fn fifo(ctx: &Ctx, one_manager: bool) -> Res<ScenarioReport> {
    const WAITERS: usize = 8;
    let trials = if ctx.quick { 5 } else { 20 };
    let tag = if one_manager { "fifo1" } else { "fifo" };
    let holder = manager(ctx, &format!("bench-{tag}-holder"));
    let waiters: Vec<PostgresLockManager> = if one_manager {
        vec![manager(ctx, &format!("bench-{tag}-waiters")); WAITERS]
    } else {
        (0..WAITERS)
            .map(|i| manager(ctx, &format!("bench-{tag}-waiter{i}")))
            .collect()
    };
    // Warm every manager (sessions open, statements prepared).
    for (i, m) in waiters.iter().enumerate() {
        let g = m.acquire(&format!("bench/{tag}/warm/{i}"), None).await?;
        g.release().await?;
    }
    let mut in_order = 0usize;
    let mut connections = 0u32;
    let mut orders = Vec::with_capacity(trials);
    let mut handoff_total = Vec::with_capacity(trials);
    let began = Instant::now();
    for trial in 0..trials {
        let key = format!("bench/{tag}/{trial}");
        let id = lock_id_for_key(&key);
        let guard = holder.acquire(&key, None).await?;
        let (tx, mut rx) = mpsc::unbounded_channel::<usize>();
        let mut tasks = Vec::with_capacity(WAITERS);
        for (i, m) in waiters.iter().enumerate() {
            let (m, k, tx) = (m.clone(), key.clone(), tx.clone());
            tasks.push(tokio::spawn(async move {
                let g = m.acquire(&k, None).await?;
                let _ = tx.send(i);
                g.release().await?;
                Res::Ok(())
            }));
            // Several managers: each waits in PostgreSQL. One manager: its
            // tasks queue in the key's wait line, the first of them waiting
            // in PostgreSQL.
            let queued = if one_manager {
                ctx.monitor.wait_for_waiters(id, 1, QUEUE_LIMIT).await?
                    && wait_for_line(&waiters[i], i + 1).await
            } else {
                ctx.monitor
                    .wait_for_waiters(id, i as i64 + 1, QUEUE_LIMIT)
                    .await?
            };
            if !queued {
                return Err(format!("{tag}: waiter {i} never queued on {key}").into());
            }
        }
        drop(tx);
        connections = connections.max(
            ctx.monitor
                .sessions_like(&format!("eventsource/bench-{tag}-%"))
                .await?,
        );
        let t0 = Instant::now();
        guard.release().await?;
        let mut order = Vec::with_capacity(WAITERS);
        while let Some(i) = rx.recv().await {
            order.push(i);
        }
        handoff_total.push(t0.elapsed());
        for t in tasks {
            t.await??;
        }
        if order.iter().copied().eq(0..WAITERS) {
            in_order += 1;
        }
        orders.push(order);
    }
    let elapsed = began.elapsed();
    holder.close().await?;
    for m in &waiters {
        m.close().await?;
    }
    let mut extra = Map::new();
    extra.insert(
        "in_order".into(),
        json!(if in_order == trials { 1.0 } else { 0.0 }),
    );
    extra.insert(
        "in_order_fraction".into(),
        json!(in_order as f64 / trials as f64),
    );
    extra.insert("trials".into(), json!(trials));
    extra.insert("waiters".into(), json!(WAITERS));
    extra.insert(
        "orders".into(),
        json!(orders
            .iter()
            .filter(|o| !o.iter().copied().eq(0..WAITERS))
            .collect::<Vec<_>>()),
    );
    extra.insert(
        "latency_of".into(),
        json!("holder's release() call to the 8th waiter's acquisition (8 hand-overs)"),
    );
    Ok(ScenarioReport {
        ops_per_sec: (trials * WAITERS) as f64 / elapsed.as_secs_f64(),
        p50_us: pct_us_of(&handoff_total, 50.0),
        p99_us: pct_us_of(&handoff_total, 99.0),
        connections,
        extra,
    })
}

/// One manager holds 10,000 locks at once (`try_acquire` from many tasks):
/// connections from `pg_stat_activity`, client memory per held lock from the
/// counting allocator (and RSS, coarser).
pub async fn capacity(ctx: &Ctx) -> Res<ScenarioReport> {
    const LOCKS: usize = 10_000;
    const TASKS: usize = 500;
    let holder = "bench-capacity";
    let mgr = manager(ctx, holder);
    let keys: Arc<Vec<String>> =
        Arc::new((0..LOCKS).map(|i| format!("bench/capacity/{i}")).collect());
    // Warm: sessions open, statements prepared, registry allocated.
    for i in 0..64 {
        let k = format!("bench/capacity/warm/{i}");
        mgr.try_lock(&k)
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))?;
        mgr.release(&k).await?;
    }
    // Per-call latencies, allocated before the baseline so they do not count.
    let lat: Arc<Vec<AtomicU64>> = Arc::new((0..LOCKS).map(|_| AtomicU64::new(0)).collect());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let live0 = alloc::live_bytes();
    let classes0 = alloc::live_by_class();
    let rss0 = alloc::rss_bytes();

    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(TASKS);
    for t in 0..TASKS {
        let (mgr, keys, lat) = (mgr.clone(), keys.clone(), lat.clone());
        tasks.push(tokio::spawn(async move {
            let mut got = 0usize;
            for i in (t..LOCKS).step_by(TASKS) {
                let t0 = Instant::now();
                if mgr
                    .try_lock(&keys[i])
                    .await
                    .map(|g| g.map(pgcoord::LockGuard::into_manual))?
                    .is_some()
                {
                    got += 1;
                }
                lat[i].store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
            Res::Ok(got)
        }));
    }
    let mut got = 0;
    for t in tasks {
        got += t.await??;
    }
    let acquire_all = t0.elapsed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let live1 = alloc::live_bytes();
    let classes1 = alloc::live_by_class();
    let rss1 = alloc::rss_bytes();
    let held = mgr.held_lock_count();
    let connections = ctx.monitor.sessions_like(&app(holder)).await?;
    let all_eventsource = ctx.monitor.sessions_like("eventsource/%").await?;
    let session_count = mgr.session_count();

    let t1 = Instant::now();
    let released = mgr.release_all().await?;
    let release_all = t1.elapsed();
    mgr.close().await?;
    if got != LOCKS || held != LOCKS {
        return Err(format!("capacity: got {got}, held {held} of {LOCKS}").into());
    }

    let lat: Vec<Duration> = lat
        .iter()
        .map(|ns| Duration::from_nanos(ns.load(Ordering::Relaxed)))
        .collect();
    let per_lock = |a: f64, b: f64| ((b - a) / LOCKS as f64).max(0.0);
    let mut extra = Map::new();
    extra.insert("held".into(), json!(held));
    extra.insert(
        "client_bytes_per_lock".into(),
        json!(per_lock(live0 as f64, live1 as f64)),
    );
    // Which block sizes grew: "up to N bytes" -> bytes per held lock.
    let by_size: Map<String, serde_json::Value> = classes0
        .iter()
        .zip(&classes1)
        .filter(|((_, a), (_, b))| (b - a).abs() >= LOCKS as i64)
        .map(|((max, a), (_, b))| {
            (
                format!("up_to_{max}"),
                json!(((b - a) as f64 / LOCKS as f64 * 10.0).round() / 10.0),
            )
        })
        .collect();
    extra.insert("client_bytes_per_lock_by_block_size".into(), json!(by_size));
    extra.insert(
        "rss_bytes_per_lock".into(),
        json!(per_lock(rss0 as f64, rss1 as f64)),
    );
    extra.insert(
        "memory_method".into(),
        json!("client_bytes_per_lock: live heap bytes from a counting global allocator, after minus before holding, / 10,000; rss_bytes_per_lock: /proc/self/statm, page-granular"),
    );
    extra.insert(
        "acquire_all_ms".into(),
        json!(acquire_all.as_secs_f64() * 1e3),
    );
    extra.insert(
        "release_all_ms".into(),
        json!(release_all.as_secs_f64() * 1e3),
    );
    extra.insert("released".into(), json!(released));
    extra.insert("session_count".into(), json!(session_count));
    extra.insert("eventsource_sessions_in_db".into(), json!(all_eventsource));
    extra.insert("tasks".into(), json!(TASKS));
    extra.insert(
        "latency_of".into(),
        json!("one try_acquire while 500 tasks fill the manager to 10,000 held locks; ops_per_sec: locks taken per second while filling"),
    );
    Ok(ScenarioReport {
        ops_per_sec: LOCKS as f64 / acquire_all.as_secs_f64(),
        p50_us: pct_us_of(&lat, 50.0),
        p99_us: pct_us_of(&lat, 99.0),
        connections,
        extra,
    })
}
