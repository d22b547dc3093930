//! Fencing tokens: what a fenced acquisition costs
//! (`ours_seq_fenced`, against `ours_seq`; `ours_conc64_fenced`, in
//! `ours_load`, against `ours_conc64`), and what a protected write costs
//! (`write_fenced`: `fencing::check` + `UPDATE` in one transaction, against
//! `write_plain`: the same transaction without the check).

use pgcoord::postgres::fencing;
use pgcoord::DistributedLock;

use crate::ctx::{Ctx, RunOut};
use crate::ours::{app, manager_with};
use crate::probe::connect;
use crate::{timed_loop, Res};

/// The table the protected writes update (one row per round).
const TABLE: &str = "CREATE TABLE IF NOT EXISTS bench_fenced_write \
                     (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0)";

/// `acquire` + `release`, uncontended, one task, on a manager built with
/// `fencing(true)` (each grant also bumps the key's fence row).
pub async fn ours_seq_fenced(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let holder = "bench-ours_seq_fenced";
    let mgr = manager_with(ctx, holder, true);
    crate::cleanup::install_fencing(ctx.monitor.client(), mgr.install_fencing()).await?;
    let key = format!("bench/ours_seq_fenced/{round}/0");
    let (w, probe) = ctx.start_window(&app(holder));
    // On a runtime worker, as `raw_seq_fenced` runs its loop: the limit
    // and ours are measured from the same kind of task.
    let worker = mgr.clone();
    let out = tokio::spawn(async move {
        let out = timed_loop!(w, 1, {
            let guard = worker.acquire(&key, None).await?;
            if guard.fence().is_none() {
                return Err("ours_seq_fenced: a fenced acquisition without a token".into());
            }
            guard.release().await?;
        });
        Res::Ok(out)
    })
    .await??;
    let run = RunOut::finish(w, vec![out], probe).await;
    mgr.close().await?;
    run
}

/// How a write transaction of [`write`] is protected.
#[derive(Debug, Clone, Copy)]
pub enum Write {
    /// No check (`write_plain`).
    Plain,
    /// `fencing::check`, then the `UPDATE` (`write_fenced`).
    Checked,
    /// `fencing::check_with`: the check and the `UPDATE` pipelined in one
    /// round trip (`write_fenced_pipelined`).
    Pipelined,
}

/// One task holds a lock (taken once, before the window) and loops write
/// transactions on one row: `BEGIN; [check;] UPDATE ...; COMMIT`. The
/// check (a `FOR SHARE` read of the key's fence row) comes as `mode` says;
/// all modes use the same fenced lock and the same prepared `UPDATE`, so
/// the only difference is the check.
pub async fn write(ctx: &Ctx, round: usize, mode: Write) -> Res<RunOut> {
    let name = match mode {
        Write::Plain => "write_plain",
        Write::Checked => "write_fenced",
        Write::Pipelined => "write_fenced_pipelined",
    };
    let app_name = format!("bench/{name}");
    let mgr = manager_with(ctx, &format!("bench-{name}"), true);
    crate::cleanup::install_fencing(ctx.monitor.client(), mgr.install_fencing()).await?;
    let mut client = connect(&ctx.options, &app_name).await?;
    let created = crate::cleanup::absent(&client, &["bench_fenced_write"]).await?;
    crate::cleanup::creating("bench_fenced_write", client.batch_execute(TABLE)).await?;
    let run = write_on(ctx, round, mode, name, &app_name, &mut client, &mgr).await;
    // The table is the run's own: dropped after each round (created again
    // by the next), on failure too.
    let dropped = crate::cleanup::drop_tables(&client, &created).await;
    mgr.close().await?;
    let run = run?;
    dropped?;
    Ok(run)
}

async fn write_on(
    ctx: &Ctx,
    round: usize,
    mode: Write,
    name: &str,
    app_name: &str,
    client: &mut tokio_postgres::Client,
    mgr: &pgcoord::PostgresLockManager,
) -> Res<RunOut> {
    let row = round as i32;
    client
        .execute(
            "INSERT INTO bench_fenced_write (id) VALUES ($1) ON CONFLICT (id) DO NOTHING",
            &[&row],
        )
        .await?;
    let update = client
        .prepare("UPDATE bench_fenced_write SET v = v + 1 WHERE id = $1")
        .await?;
    let guard = mgr.acquire(&format!("bench/{name}/{round}"), None).await?;
    // How big the fence table has grown (dead row versions of the fenced
    // scenarios before this one): its size and the server's tuple counts.
    let fence_table: (i64, i64, i64) = {
        let r = client
            .query_one(
                "SELECT pg_relation_size('eventsource_lock_fences')::int8, \
                        coalesce(s.n_live_tup, 0)::int8, coalesce(s.n_dead_tup, 0)::int8 \
                 FROM (SELECT 1) AS one \
                 LEFT JOIN pg_stat_user_tables s ON s.relname = 'eventsource_lock_fences'",
                &[],
            )
            .await?;
        (r.get(0), r.get(1), r.get(2))
    };
    let (w, probe) = ctx.start_window(app_name);
    let out = timed_loop!(w, 1, {
        let tx = client.transaction().await?;
        let n = match mode {
            Write::Plain => tx.execute(&update, &[&row]).await?,
            Write::Checked => {
                fencing::check(&tx, guard.info()).await?;
                tx.execute(&update, &[&row]).await?
            }
            Write::Pipelined => {
                fencing::check_with(&tx, guard.info(), tx.execute(&update, &[&row])).await?
            }
        };
        if n != 1 {
            return Err(format!("{name}: updated {n} rows, 1 expected").into());
        }
        tx.commit().await?;
    });
    let run = RunOut::finish(w, vec![out], probe)
        .await?
        .with("fence_table_bytes", fence_table.0.into())
        .with("fence_table_live_rows", fence_table.1.into())
        .with("fence_table_dead_rows", fence_table.2.into());
    guard.release().await?;
    Ok(run)
}
