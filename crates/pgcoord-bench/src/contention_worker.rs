//! One worker process of the `contention` scenario (`--contention-worker`,
//! its spec in `PGCOORD_BENCH_SPEC`: see `child.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;
use sqlx::postgres::{PgAdvisoryLock, PgAdvisoryLockKey, PgPoolOptions};

use crate::contention::{unix_ns, Impl, Spec, TaskReport, WorkerReport};
use crate::stats::Window;
use crate::{alloc, Res};

/// How long after the window one `acquire` may still take (the queues drain).
const DRAIN: Duration = Duration::from_secs(10);

enum Locks {
    Ours(PostgresLockManager),
    Sqlx(sqlx::PgPool),
}

pub async fn run(spec_json: &str) -> Res<()> {
    let spec: Spec = serde_json::from_str(spec_json)?;
    let options = crate::transport::pin(crate::ctx::user_options(&spec.url)?, spec.transport);
    let locks = match spec.imp {
        Impl::Ours => {
            let holder = spec.app.trim_start_matches("eventsource/").to_owned();
            let mut b = PostgresLockManager::builder(options).holder_id(holder);
            if let Some(n) = spec.batched_sessions {
                b = b.batched_sessions(n);
            }
            let mgr = b.build()?;
            let warm = format!("{}/warm/{}", spec.keys[0], std::process::id());
            mgr.acquire(&warm, None).await?.release().await?;
            Locks::Ours(mgr)
        }
        Impl::Sqlx => {
            let opts = crate::transport::sqlx_connectable(&options, &spec.app).await?;
            let pool = PgPoolOptions::new()
                .acquire_timeout(crate::transport::SESSION_LIMIT)
                .max_connections(spec.tasks as u32)
                .min_connections(spec.tasks as u32)
                .connect_with(opts)
                .await?;
            Locks::Sqlx(pool)
        }
    };
    let locks = Arc::new(locks);
    let now_unix = unix_ns();
    let now = Instant::now();
    let start = if spec.start_unix_ns > now_unix {
        now + Duration::from_nanos(spec.start_unix_ns - now_unix)
    } else {
        now - Duration::from_nanos(now_unix - spec.start_unix_ns)
    };
    let w = Window {
        start,
        end: start + Duration::from_nanos(spec.measure_ns),
    };
    let ready_lead_ms = if start >= now {
        (start - now).as_secs_f64() * 1e3
    } else {
        -(now - start).as_secs_f64() * 1e3
    };
    let max_sessions = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (locks, max) = (locks.clone(), max_sessions.clone());
        tokio::spawn(async move {
            if let Locks::Ours(m) = &*locks {
                while Instant::now() < w.end {
                    max.fetch_max(m.session_count(), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        })
    };
    let mut handles = Vec::with_capacity(spec.tasks);
    for t in 0..spec.tasks {
        let locks = locks.clone();
        let key = spec.keys[t % spec.keys.len()].clone();
        handles.push(tokio::spawn(async move { task(&locks, &key, w).await }));
    }
    let cpu = tokio::spawn(async move {
        tokio::time::sleep_until(w.start.into()).await;
        let c0 = alloc::cpu_ns(None);
        tokio::time::sleep_until(w.end.into()).await;
        c0.zip(alloc::cpu_ns(None))
            .map(|(a, b)| b.saturating_sub(a))
    });
    let mut report = WorkerReport {
        ready_lead_ms,
        ..WorkerReport::default()
    };
    for h in handles {
        report.tasks.push(h.await??);
    }
    report.cpu_ns = cpu.await?;
    sampler.await?;
    if let Locks::Ours(m) = &*locks {
        report.max_sessions = Some(max_sessions.load(Ordering::Relaxed));
        m.close().await?;
    }
    if let Locks::Sqlx(p) = &*locks {
        p.close().await;
    }
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

async fn task(locks: &Locks, key: &str, w: Window) -> Res<TaskReport> {
    let mut out = TaskReport::default();
    let limit = tokio::time::Instant::from_std(w.end + DRAIN);
    let id = pgcoord::lock_id_for_key(key);
    let sqlx_lock = PgAdvisoryLock::with_key(PgAdvisoryLockKey::BigInt(id));
    loop {
        let t0 = Instant::now();
        if t0 >= w.end {
            break;
        }
        let waited = match locks {
            Locks::Ours(m) => {
                let g = tokio::time::timeout_at(limit, m.acquire(key, None))
                    .await
                    .map_err(|_| "acquire did not return after the window")??;
                let t1 = Instant::now();
                g.release().await?;
                t1
            }
            Locks::Sqlx(pool) => {
                let conn = pool.acquire().await?;
                let g = tokio::time::timeout_at(limit, sqlx_lock.acquire(conn))
                    .await
                    .map_err(|_| "acquire did not return after the window")??;
                let t1 = Instant::now();
                g.release_now().await?;
                t1
            }
        };
        if t0 >= w.start {
            out.ops += 1;
            out.waits_ns.push((waited - t0).as_nanos() as u64);
            out.last_end_ns =
                Some(Instant::now().saturating_duration_since(w.start).as_nanos() as u64);
        }
    }
    Ok(out)
}
