//! The physical limit of a fenced grant: one tokio-postgres connection
//! doing in plain SQL what a fenced acquisition does (the wait and the
//! key's fence increment in one statement, then the unlock), sequentially
//! (`raw_seq_fenced`) and 64-way pipelined (`raw_pipelined64_fenced`); and
//! the same with the epoch of the library's tokens (`..._epoch`: the
//! increment is `GREATEST(fence + 1, $3)`, `$3` the timeline's first token
//! read once per session), to price the epoch itself. Like a fencing manager's sessions, these run with
//! `synchronous_commit = on`.

use std::sync::Arc;

use pgcoord::lock_id_for_key;
use pgcoord::postgres::fencing;

use crate::ctx::{Ctx, RunOut};
use crate::probe::connect;
use crate::{timed_loop, Res};

/// The wait and a plain increment (what the fence did before the epoch).
const LOCK_FENCED: &str = "WITH l AS (SELECT pg_catalog.pg_advisory_lock($1)) \
     INSERT INTO eventsource_lock_fences AS f (lock_id, key, fence) SELECT $1, $2, 1 FROM l \
     ON CONFLICT (lock_id) DO UPDATE SET fence = f.fence + 1 RETURNING f.fence";
/// The wait and the increment with the epoch, as the library sends it:
/// the epoch's first token is read once per session and bound as `$3`.
const LOCK_FENCED_EPOCH: &str = "WITH l AS (SELECT pg_catalog.pg_advisory_lock($1)) \
     INSERT INTO eventsource_lock_fences AS f (lock_id, key, fence) SELECT $1, $2, $3::int8 FROM l \
     ON CONFLICT (lock_id) DO UPDATE SET fence = GREATEST(f.fence + 1, $3::int8) RETURNING f.fence";
const FIRST_TOKEN: &str = "SELECT (eventsource_lock_epoch() << 40) + 1";
const UNLOCK: &str = "SELECT pg_catalog.pg_advisory_unlock($1)";

/// `tasks` tasks on one connection (1: sequential), each locking, fencing
/// and unlocking a key of its own.
pub async fn raw_fenced(ctx: &Ctx, round: usize, tasks: usize, epoch: bool) -> Res<RunOut> {
    let name = match (tasks, epoch) {
        (1, false) => "raw_seq_fenced".to_owned(),
        (1, true) => "raw_seq_fenced_epoch".to_owned(),
        (n, false) => format!("raw_pipelined{n}_fenced"),
        (n, true) => format!("raw_pipelined{n}_fenced_epoch"),
    };
    let app = format!("bench/{name}");
    let mut client = connect(&ctx.options, &app).await?;
    crate::cleanup::install_fencing(ctx.monitor.client(), fencing::install(&mut client)).await?;
    client.batch_execute("SET synchronous_commit = on").await?;
    let client = Arc::new(client);
    let lock = client
        .prepare(if epoch {
            LOCK_FENCED_EPOCH
        } else {
            LOCK_FENCED
        })
        .await?;
    let unlock = client.prepare(UNLOCK).await?;
    let first: i64 = client.query_one(FIRST_TOKEN, &[]).await?.get(0);
    let (w, probe) = ctx.start_window(&app);
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let (client, lock, unlock) = (client.clone(), lock.clone(), unlock.clone());
        let first = if epoch { Some(first) } else { None };
        let key = format!("{app}/{round}/{t}");
        let id = lock_id_for_key(&key);
        handles.push(tokio::spawn(async move {
            let out = timed_loop!(w, 1, {
                let fence: i64 = match &first {
                    Some(first) => client.query_one(&lock, &[&id, &key, first]).await?,
                    None => client.query_one(&lock, &[&id, &key]).await?,
                }
                .get(0);
                assert!(fence > 0, "a fence token");
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
