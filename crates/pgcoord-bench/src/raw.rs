//! Baselines: raw tokio-postgres (the limit) and sqlx's `PgAdvisoryLock` (the peer).

use std::sync::Arc;

use pgcoord::lock_id_for_key;
use sqlx::postgres::PgAdvisoryLock;
use sqlx::postgres::PgAdvisoryLockKey;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Either};

use crate::transport::Transport;

use crate::ctx::{Ctx, RunOut};
use crate::probe::connect;
use crate::stats::WorkerOut;
use crate::{timed_loop, Res};

const TRY_LOCK: &str = "SELECT pg_try_advisory_lock($1)";
const UNLOCK: &str = "SELECT pg_advisory_unlock($1)";

/// The number of ids per statement in `raw_batched`.
pub const BATCH: usize = 1000;

/// One connection, prepared try-lock then unlock, sequential.
pub async fn raw_seq(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let app = "bench/raw_seq";
    let client = connect(&ctx.options, app).await?;
    let lock = client.prepare(TRY_LOCK).await?;
    let unlock = client.prepare(UNLOCK).await?;
    let id = lock_id_for_key(&format!("bench/raw_seq/{round}/0"));
    let (w, probe) = ctx.start_window(app);
    let out = timed_loop!(w, 1, {
        let got: bool = client.query_one(&lock, &[&id]).await?.get(0);
        assert!(got, "raw_seq: key unexpectedly held");
        let freed: bool = client.query_one(&unlock, &[&id]).await?.get(0);
        assert!(freed);
    });
    RunOut::finish(w, vec![out], probe).await
}

/// `tasks` tasks sharing one connection: tokio-postgres pipelines their
/// queries (`raw_pipelined64`, and the tasks sweep).
pub async fn raw_pipelined(ctx: &Ctx, round: usize, tasks: usize) -> Res<RunOut> {
    let app = format!("bench/raw_pipelined{tasks}");
    let client = Arc::new(connect(&ctx.options, &app).await?);
    let lock = client.prepare(TRY_LOCK).await?;
    let unlock = client.prepare(UNLOCK).await?;
    let (w, probe) = ctx.start_window(&app);
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let (client, lock, unlock) = (client.clone(), lock.clone(), unlock.clone());
        let id = lock_id_for_key(&format!("{app}/{round}/{t}"));
        handles.push(tokio::spawn(async move {
            let out = timed_loop!(w, 1, {
                let got: bool = client.query_one(&lock, &[&id]).await?.get(0);
                assert!(got, "raw_pipelined: key unexpectedly held");
                let freed: bool = client.query_one(&unlock, &[&id]).await?.get(0);
                assert!(freed);
            });
            Res::Ok(out)
        }));
    }
    let mut outs = Vec::with_capacity(tasks);
    for h in handles {
        outs.push(h.await??);
    }
    RunOut::finish(w, outs, probe).await
}

/// One statement locks 1,000 ids, one unlocks them: the server's per-lock cost when batched.
pub async fn raw_batched(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let app = "bench/raw_batched";
    let client = connect(&ctx.options, app).await?;
    let lock = client
        .prepare(
            "SELECT count(*) FILTER (WHERE pg_try_advisory_lock(k)) \
             FROM unnest($1::bigint[]) AS t(k)",
        )
        .await?;
    let unlock = client
        .prepare(
            "SELECT count(*) FILTER (WHERE pg_advisory_unlock(k)) \
             FROM unnest($1::bigint[]) AS t(k)",
        )
        .await?;
    let ids: Vec<i64> = (0..BATCH)
        .map(|i| lock_id_for_key(&format!("bench/raw_batched/{round}/{i}")))
        .collect();
    let (w, probe) = ctx.start_window(app);
    let out = timed_loop!(w, BATCH as u64, {
        let got: i64 = client.query_one(&lock, &[&ids]).await?.get(0);
        assert_eq!(got, BATCH as i64, "raw_batched: some key unexpectedly held");
        let freed: i64 = client.query_one(&unlock, &[&ids]).await?.get(0);
        assert_eq!(freed, BATCH as i64);
    });
    RunOut::finish(w, vec![out], probe).await
}

/// sqlx's options: the same server (the first host that answers), user,
/// database and transport as the library's sessions (see `transport.rs`).
async fn sqlx_options(ctx: &Ctx, app: &str) -> Res<PgConnectOptions> {
    crate::transport::sqlx_connectable(&ctx.options, app).await
}

/// Why the diagnostics that poll the tokio-postgres `Connection`
/// themselves cannot run on this transport (None: they can). The
/// library's TLS connector is not public: `connect_for_inspection` hands
/// back a client whose connection is already spawned, so with TLS there
/// is no connection to poll inline without a second TLS stack that would
/// not be the one the library's sessions use.
pub fn inline_skip_reason(ctx: &Ctx) -> Option<String> {
    (ctx.transport == Transport::Tls).then(|| {
        "polls the tokio-postgres connection itself, which needs a TLS connector the \
         library does not make public; runs only on a plaintext transport"
            .to_owned()
    })
}

/// sqlx: `PgAdvisoryLock::try_acquire` + `release_now` on one connection, sequential.
pub async fn sqlx_seq(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let app = "bench/sqlx_seq";
    let mut conn = sqlx_options(ctx, app).await?.connect().await?;
    let id = lock_id_for_key(&format!("bench/sqlx_seq/{round}/0"));
    let lock = PgAdvisoryLock::with_key(PgAdvisoryLockKey::BigInt(id));
    let (w, probe) = ctx.start_window(app);
    let out = timed_loop!(w, 1, {
        match lock.try_acquire(&mut conn).await? {
            Either::Left(guard) => {
                guard.release_now().await?;
            }
            Either::Right(_) => panic!("sqlx_seq: key unexpectedly held"),
        }
    });
    RunOut::finish(w, vec![out], probe).await
}

/// Connections in the sqlx pool of `sqlx_pool{N}`: one per task up to this many.
pub const SQLX_POOL: usize = 8;

/// sqlx: `tasks` tasks over a pool of min(tasks, 8) connections (default
/// pool settings otherwise), each taking a pooled connection per lock, as a
/// service would (`sqlx_pool64`, and the tasks sweep).
pub async fn sqlx_pool(ctx: &Ctx, round: usize, tasks: usize) -> Res<RunOut> {
    let app = format!("bench/sqlx_pool{tasks}");
    let size = tasks.clamp(1, SQLX_POOL) as u32;
    let pool = PgPoolOptions::new()
        .max_connections(size)
        .min_connections(size)
        .connect_with(sqlx_options(ctx, &app).await?)
        .await?;
    let (w, probe) = ctx.start_window(&app);
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let pool = pool.clone();
        let id = lock_id_for_key(&format!("{app}/{round}/{t}"));
        handles.push(tokio::spawn(async move {
            let lock = PgAdvisoryLock::with_key(PgAdvisoryLockKey::BigInt(id));
            let out: WorkerOut = timed_loop!(w, 1, {
                let conn = pool.acquire().await?;
                match lock.try_acquire(conn).await? {
                    Either::Left(guard) => {
                        guard.release_now().await?;
                    }
                    Either::Right(_) => panic!("sqlx_pool: key unexpectedly held"),
                }
            });
            Res::Ok(out)
        }));
    }
    let mut outs = Vec::with_capacity(tasks);
    for h in handles {
        outs.push(h.await??);
    }
    let run = RunOut::finish(w, outs, probe).await;
    pool.close().await;
    run
}

/// Diagnostic, not a target: `raw_seq` with the tokio-postgres
/// `Connection` polled inside the caller's own task instead of a spawned
/// one, so a round trip wakes one task instead of hopping between two.
/// Shows what the task hops cost the sequential path.
pub async fn raw_seq_inline(ctx: &Ctx, round: usize) -> Res<RunOut> {
    let app = "bench/raw_seq_inline";
    if let Some(why) = inline_skip_reason(ctx) {
        return Err(why.into());
    }
    let mut config = ctx.options.config().clone();
    config.application_name(app);
    let (client, mut connection) = config.connect(tokio_postgres::NoTls).await?;
    let work = async {
        let lock = client.prepare(TRY_LOCK).await?;
        let unlock = client.prepare(UNLOCK).await?;
        let id = lock_id_for_key(&format!("bench/raw_seq_inline/{round}/0"));
        let (w, probe) = ctx.start_window(app);
        let out = timed_loop!(w, 1, {
            let got: bool = client.query_one(&lock, &[&id]).await?.get(0);
            assert!(got, "raw_seq_inline: key unexpectedly held");
            let freed: bool = client.query_one(&unlock, &[&id]).await?.get(0);
            assert!(freed);
        });
        RunOut::finish(w, vec![out], probe).await
    };
    tokio::pin!(work);
    tokio::select! {
        run = &mut work => run,
        end = &mut connection => Err(format!("raw_seq_inline: connection ended: {end:?}").into()),
    }
}

/// Diagnostic, not a target: `raw_seq` through an actor task like the
/// manager's sessions (caller -> channel -> actor -> `Client` -> reply on a
/// oneshot), with the tokio-postgres `Connection` either spawned as its own
/// task (`inline = false`, the manager's layout today) or polled inside the
/// actor (`inline = true`). Prices the hops apart from the bookkeeping.
pub async fn raw_seq_actor(ctx: &Ctx, round: usize, inline: bool) -> Res<RunOut> {
    type Req = (
        bool,
        i64,
        tokio::sync::oneshot::Sender<Result<bool, String>>,
    );
    let app = if inline {
        "bench/raw_seq_actor_inline"
    } else {
        "bench/raw_seq_actor"
    };
    let (client, mut connection) = if inline {
        if let Some(why) = inline_skip_reason(ctx) {
            return Err(why.into());
        }
        let mut config = ctx.options.config().clone();
        config.application_name(app);
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        (client, Some(connection))
    } else {
        (connect(&ctx.options, app).await?, None)
    };
    let (lock, unlock) = {
        let prep = async {
            Ok::<_, tokio_postgres::Error>((
                client.prepare(TRY_LOCK).await?,
                client.prepare(UNLOCK).await?,
            ))
        };
        match connection.as_mut() {
            Some(conn) => tokio::select! {
                r = prep => r?,
                end = conn => return Err(format!("{app}: connection ended: {end:?}").into()),
            },
            None => prep.await?,
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Req>();
    let actor = tokio::spawn(async move {
        loop {
            let req = match connection.as_mut() {
                Some(conn) => tokio::select! {
                    req = rx.recv() => req,
                    _ = conn => None,
                },
                None => rx.recv().await,
            };
            let Some((is_lock, id, reply)) = req else {
                break;
            };
            let stmt = if is_lock { &lock } else { &unlock };
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
            let query = client.query_one(stmt, &params);
            let row = match connection.as_mut() {
                Some(conn) => tokio::select! {
                    row = query => row,
                    end = conn => {
                        let _ = reply.send(Err(format!("connection ended: {end:?}")));
                        break;
                    }
                },
                None => query.await,
            };
            let _ = reply.send(row.map(|r| r.get(0)).map_err(|e| e.to_string()));
        }
    });
    let call = |is_lock: bool, id: i64| {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = tx.send((is_lock, id, reply)).is_ok();
        async move {
            if !sent {
                return Err("actor gone".to_owned());
            }
            answer.await.map_err(|_| "actor gone".to_owned())?
        }
    };
    let id = lock_id_for_key(&format!("{app}/{round}/0"));
    let (w, probe) = ctx.start_window(app);
    let out = timed_loop!(w, 1, {
        assert!(call(true, id).await?, "{app}: key unexpectedly held");
        assert!(call(false, id).await?);
    });
    drop(tx);
    let _ = actor.await;
    RunOut::finish(w, vec![out], probe).await
}
