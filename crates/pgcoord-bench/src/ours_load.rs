//! Our manager under concurrent load: `ours_conc64`, `ours_conc1024` and
//! `held10k` (the `ours_conc64` workload while the manager holds 10,000
//! other locks).

use std::sync::Arc;
use std::time::Instant;

use pgcoord::{DistributedLock, LockRegistry};
use serde_json::json;

use crate::ctx::{Ctx, RunOut};
use crate::ours::{app, manager_with};
use crate::{timed_loop, Res};

/// How many tasks fill the manager with its held locks.
const FILL_TASKS: usize = 500;

/// `tasks` tasks, distinct uncontended keys, `acquire` + `release`, one
/// manager; with `held > 0`, the manager first takes `held` other locks
/// (`try_acquire`) and keeps them through the window.
pub async fn ours_conc(ctx: &Ctx, round: usize, tasks: usize, held: usize) -> Res<RunOut> {
    ours_conc_with(ctx, round, tasks, held, false).await
}

/// [`ours_conc`] on a manager with fencing tokens on (`ours_conc64_fenced`)
/// or off; a fenced run installs the fencing table first and checks that
/// every guard carries a token.
pub async fn ours_conc_with(
    ctx: &Ctx,
    round: usize,
    tasks: usize,
    held: usize,
    fenced: bool,
) -> Res<RunOut> {
    let name = if fenced {
        format!("ours_conc{tasks}_fenced")
    } else if held == crate::ctx::HELD_LOCKS && tasks == 64 {
        "held10k".to_owned()
    } else if held > 0 {
        format!("ours_conc{tasks}_held{held}")
    } else {
        format!("ours_conc{tasks}")
    };
    let holder = format!("bench-{name}");
    let mgr = manager_with(ctx, &holder, fenced);
    if fenced {
        crate::cleanup::install_fencing(ctx.monitor.client(), mgr.install_fencing()).await?;
    }
    let mut fill_ms = None;
    if held > 0 {
        let t0 = Instant::now();
        fill(&mgr, &format!("bench/{name}/{round}/held"), held).await?;
        fill_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
        let n = mgr.held_lock_count();
        if n != held {
            return Err(format!("{name}: holds {n} of {held} after filling").into());
        }
    }
    let (w, probe) = ctx.start_window(&app(&holder));
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let mgr = mgr.clone();
        let key = format!("bench/{name}/{round}/{t}");
        handles.push(tokio::spawn(async move {
            let out = timed_loop!(w, 1, {
                let guard = mgr.acquire(&key, None).await?;
                if fenced && guard.fence().is_none() {
                    return Err(format!("{key}: a fenced acquisition without a token").into());
                }
                guard.release().await?;
            });
            Res::Ok(out)
        }));
    }
    let mut outs = Vec::with_capacity(tasks);
    for h in handles {
        outs.push(h.await??);
    }
    let mut run = RunOut::finish(w, outs, probe).await?;
    if held > 0 {
        let still = mgr.held_lock_count();
        run = run
            .with("held_during_window", json!(still))
            .with("fill_ms", json!(fill_ms));
        mgr.release_all().await?;
    }
    mgr.close().await?;
    Ok(run)
}

/// Takes `n` locks `{prefix}/{i}` with `try_acquire` from [`FILL_TASKS`] tasks.
pub async fn fill(mgr: &pgcoord::PostgresLockManager, prefix: &str, n: usize) -> Res<()> {
    let keys: Arc<Vec<String>> = Arc::new((0..n).map(|i| format!("{prefix}/{i}")).collect());
    let mut tasks = Vec::with_capacity(FILL_TASKS);
    for t in 0..FILL_TASKS.min(n) {
        let (mgr, keys) = (mgr.clone(), keys.clone());
        tasks.push(tokio::spawn(async move {
            for i in (t..keys.len()).step_by(FILL_TASKS) {
                if mgr
                    .try_lock(&keys[i])
                    .await
                    .map(|g| g.map(pgcoord::LockGuard::into_manual))?
                    .is_none()
                {
                    return Err(format!("{} unexpectedly held", keys[i]).into());
                }
            }
            Res::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}
