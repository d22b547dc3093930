//! The protected writes of the failover checker and their audit.
//!
//! A protected write is a read-modify-write of the key's counter row in
//! `fx_protected`, logged as a row `(key, fence, counter_after)` of
//! `fx_writes`, in one transaction that checked the token first: with
//! `fencing::check` (the Rust path) or `eventsource_lock_fence_check_key`
//! (the SQL path). From the database alone, afterwards: in counter order a
//! key's fences strictly increase (each grant writes once, and no two
//! grants share a token; anything else is a **stale protected write
//! accepted**), and the counter equals the number of writes (a shortfall is
//! a **lost update**).

use std::collections::HashMap;
use std::time::Duration;

use pgcoord::postgres::fencing;

pub const SCHEMA: &str =
    "CREATE TABLE fx_protected (key text PRIMARY KEY, counter bigint NOT NULL); \
     CREATE TABLE fx_writes (key text, fence bigint, counter_after bigint)";

/// What the writer's transaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    /// The check refused the token (`Error::Fenced` / SQLSTATE `ESF01`).
    Refused,
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Committed => "committed",
            Outcome::Refused => "refused",
            Outcome::Error => "error",
        }
    }
}

/// The rest of a protected write once its check passed: read the counter,
/// wait `work` (a holder computing its update), write it and the log row,
/// commit.
async fn read_modify_write(
    tx: tokio_postgres::Transaction<'_>,
    key: &str,
    fence: i64,
    work: Duration,
) -> Outcome {
    let Ok(row) = tx
        .query_one("SELECT counter FROM fx_protected WHERE key = $1", &[&key])
        .await
    else {
        return Outcome::Error;
    };
    let next = row.get::<_, i64>(0) + 1;
    tokio::time::sleep(work).await;
    let write = async {
        tx.execute(
            "UPDATE fx_protected SET counter = $2 WHERE key = $1",
            &[&key, &next],
        )
        .await?;
        tx.execute(
            "INSERT INTO fx_writes (key, fence, counter_after) VALUES ($1, $2, $3)",
            &[&key, &fence, &next],
        )
        .await?;
        tx.commit().await
    };
    match write.await {
        Ok(()) => Outcome::Committed,
        Err(_) => Outcome::Error,
    }
}

/// A protected write under `guard`, checked with `fencing::check`.
pub async fn protected_write(
    data: &mut tokio_postgres::Client,
    guard: &pgcoord::LockGuard,
    work: Duration,
) -> Outcome {
    let Ok(tx) = data.transaction().await else {
        return Outcome::Error;
    };
    match fencing::check(&tx, guard.info()).await {
        Ok(_) => {}
        Err(e) if e.is_fenced() => return Outcome::Refused,
        Err(_) => return Outcome::Error,
    }
    let fence = guard.fence().unwrap() as i64;
    read_modify_write(tx, guard.key(), fence, work).await
}

/// A protected write presenting `token` for `key`, checked with the SQL
/// function; `meanwhile` runs after the check and the read, before the
/// write (another writer getting in between).
pub async fn sql_checked_write<F: std::future::Future<Output = ()>>(
    data: &mut tokio_postgres::Client,
    key: &str,
    token: u64,
    meanwhile: F,
) -> Outcome {
    let Ok(tx) = data.transaction().await else {
        return Outcome::Error;
    };
    let checked = tx
        .query_one(
            "SELECT eventsource_lock_fence_check_key($1, $2)",
            &[&key, &(token as i64)],
        )
        .await;
    match checked {
        Ok(_) => {}
        Err(e) if e.code().map(|c| c.code()) == Some(fencing::FENCED_SQLSTATE) => {
            return Outcome::Refused
        }
        Err(_) => return Outcome::Error,
    }
    let Ok(row) = tx
        .query_one("SELECT counter FROM fx_protected WHERE key = $1", &[&key])
        .await
    else {
        return Outcome::Error;
    };
    let next = row.get::<_, i64>(0) + 1;
    meanwhile.await;
    let write = async {
        tx.execute(
            "UPDATE fx_protected SET counter = $2 WHERE key = $1",
            &[&key, &next],
        )
        .await?;
        tx.execute(
            "INSERT INTO fx_writes (key, fence, counter_after) VALUES ($1, $2, $3)",
            &[&key, &(token as i64), &next],
        )
        .await?;
        tx.commit().await
    };
    match write.await {
        Ok(()) => Outcome::Committed,
        Err(_) => Outcome::Error,
    }
}

/// The database's verdict on the protected writes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Audit {
    pub writes: usize,
    pub stale_accepted: usize,
    pub lost_updates: i64,
}

/// Reads both tables in one snapshot (writers may still be running).
pub async fn audit(client: &mut tokio_postgres::Client) -> Audit {
    let client = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .unwrap();
    let rows = client
        .query(
            "SELECT key, fence, counter_after FROM fx_writes ORDER BY key, counter_after, fence",
            &[],
        )
        .await
        .unwrap();
    let mut by_key: HashMap<String, Vec<i64>> = HashMap::new();
    for r in &rows {
        by_key.entry(r.get(0)).or_default().push(r.get(1));
    }
    let stale_accepted = by_key
        .values()
        .map(|fences| fences.windows(2).filter(|w| w[1] <= w[0]).count())
        .sum();
    let counted: i64 = client
        .query_one(
            "SELECT coalesce(sum(counter), 0)::int8 FROM fx_protected",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    client.commit().await.unwrap();
    Audit {
        writes: rows.len(),
        stale_accepted,
        lost_updates: rows.len() as i64 - counted,
    }
}
