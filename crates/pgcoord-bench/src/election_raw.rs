//! The floor under `election_resign`: the same fenced hand-over in plain
//! SQL on two tokio-postgres sessions, run in the same trials (paired, so
//! the machine's load hits both alike). Session A holds the advisory lock;
//! session B waits for it in one statement that also takes the next term
//! from the fence table (as a fencing manager's dedicated session does);
//! timed from A's `pg_advisory_unlock` being sent to B's answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::lock_id_for_key;
use tokio_postgres::{Client, Statement};

use crate::ctx::Ctx;
use crate::probe::connect;
use crate::Res;

const KEY: &str = "bench/election_resign_raw";

/// The two sessions and their statements.
pub struct RawHandover {
    a: Client,
    b: Arc<Client>,
    lock: Statement,
    unlock: Statement,
    wait_fenced: Statement,
    unlock_b: Statement,
    id: i64,
}

impl RawHandover {
    /// Opens the two sessions (the fence table must exist: `install_fencing()`).
    pub async fn open(ctx: &Ctx) -> Res<Self> {
        let a = connect(&ctx.options, "bench/election_resign_raw-a").await?;
        let b = connect(&ctx.options, "bench/election_resign_raw-b").await?;
        let lock = a.prepare("SELECT pg_catalog.pg_advisory_lock($1)").await?;
        let unlock = a
            .prepare("SELECT pg_catalog.pg_advisory_unlock($1)")
            .await?;
        let wait_fenced = b
            .prepare(
                "WITH granted AS (SELECT pg_catalog.pg_advisory_lock($1)) \
                 INSERT INTO eventsource_lock_fences AS f (lock_id, key, fence) \
                 SELECT $1, $2, 1 FROM granted \
                 ON CONFLICT (lock_id) DO UPDATE SET fence = f.fence + 1 RETURNING f.fence",
            )
            .await?;
        let unlock_b = b
            .prepare("SELECT pg_catalog.pg_advisory_unlock($1)")
            .await?;
        Ok(Self {
            a,
            b: Arc::new(b),
            lock,
            unlock,
            wait_fenced,
            unlock_b,
            id: lock_id_for_key(KEY),
        })
    }

    /// One hand-over: A locks, B queues (seen in `pg_locks`), A unlocks;
    /// the time from A's unlock to B's grant with its term.
    pub async fn trial(&self, ctx: &Ctx, limit: Duration) -> Res<Duration> {
        self.a.query_one(&self.lock, &[&self.id]).await?;
        let (b, id) = (self.b.clone(), self.id);
        let (wait, unlock) = (self.wait_fenced.clone(), self.unlock_b.clone());
        let waiter = tokio::spawn(async move {
            let row = b.query_one(&wait, &[&id, &KEY]).await?;
            let at = Instant::now();
            let term: i64 = row.get(0);
            b.query_one(&unlock, &[&id]).await?;
            Res::Ok((at, term))
        });
        if !ctx.monitor.wait_for_waiters(self.id, 1, limit).await? {
            return Err("election_resign: the raw waiter never queued".into());
        }
        let t0 = Instant::now();
        self.a.query_one(&self.unlock, &[&self.id]).await?;
        let (at, term) = waiter.await??;
        if term < 1 {
            return Err(format!("election_resign: the raw waiter's term is {term}").into());
        }
        Ok(at.saturating_duration_since(t0))
    }
}
