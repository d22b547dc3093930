//! One trial of the `failover` scenario: a primary with a streaming
//! standby, managers given both hosts holding, waiting and leading on the
//! primary; the primary is stopped (immediate mode, as a crash), the
//! standby promoted; what is measured starts with the last poll of the
//! standby that still saw it in recovery.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::coordination::{Election, Leadership};
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock, LockGuard};
use pgcoord_testkit::pg::{StopMode, TestCluster};
use tokio::task::JoinHandle;

use crate::Res;

/// How long anything of a trial may take.
pub const LIMIT: Duration = Duration::from_secs(60);
/// The pause of the retry loops below (a user's loop would have one).
pub const RETRY: Duration = Duration::from_millis(10);
/// Managers that only hold a lock each, besides the holder, the waiter
/// and the two candidates.
const IDLE_MANAGERS: usize = 4;
const ELECTION: &str = "bench/failover";
const KEY: &str = "bench/failover/key";

/// What one trial measured, each from the promoted standby accepting writes.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Until every manager had a lock on the new primary again.
    pub reconnected: Duration,
    /// Until the waiter queued on the old primary held the key.
    pub waiter: Duration,
    /// Until a candidate led on the new primary.
    pub leader: Duration,
    /// Managers in the trial.
    pub managers: usize,
    /// How far the start of the clock may be before the promotion (the
    /// last poll that saw recovery to the first that did not).
    pub resolution: Duration,
}

fn manager(url: &str, holder: &str) -> Res<PostgresLockManager> {
    Ok(PostgresLockManager::builder(url.parse()?)
        .holder_id(holder)
        .fencing(true)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap())
}

async fn connect(url: &str) -> Res<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// Waits until `n` sessions of `client`'s server wait for `key`.
async fn queued(client: &tokio_postgres::Client, key: &str, n: i64) -> Res<()> {
    let id = lock_id_for_key(key);
    let until = Instant::now() + LIMIT;
    while Instant::now() < until {
        let waiting: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 \
                 AND NOT granted AND ((classid::int8 << 32) | objid::int8) = $1",
                &[&id],
            )
            .await?
            .get(0);
        if waiting >= n {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Err(format!("failover: nobody queued for {key}").into())
}

/// Acquires `key` again and again until it is granted; the instant it was.
async fn retake(m: PostgresLockManager, key: String) -> Res<(LockGuard, Instant)> {
    let until = Instant::now() + LIMIT;
    while Instant::now() < until {
        match m.acquire(&key, Some(LIMIT)).await {
            Ok(g) => return Ok((g, Instant::now())),
            Err(_) => tokio::time::sleep(RETRY).await,
        }
    }
    Err(format!("failover: {key} never granted again").into())
}

/// Campaigns again and again until it leads; the instant it did.
async fn lead(m: PostgresLockManager) -> Res<(Leadership, Instant)> {
    let election = Election::new(m, ELECTION).expect("a fencing lock manager");
    let until = Instant::now() + LIMIT;
    while Instant::now() < until {
        match election.campaign(Some(LIMIT)).await {
            Ok(l) => return Ok((l, Instant::now())),
            Err(_) => tokio::time::sleep(RETRY).await,
        }
    }
    Err("failover: no candidate led again".into())
}

/// Once `guard` is lost, takes its key again.
fn after_loss(m: PostgresLockManager, guard: LockGuard) -> JoinHandle<Res<(LockGuard, Instant)>> {
    tokio::spawn(async move {
        let key = guard.key().to_owned();
        tokio::time::timeout(LIMIT, guard.lost())
            .await
            .map_err(|_| format!("failover: {key} never reported lost"))?;
        drop(guard);
        retake(m, key).await
    })
}

/// Runs one trial on `primary` (fence table installed), whose standby is
/// made here; returns the promoted standby (the next trial's primary), the
/// figures, and the last term and token seen (each must rise).
pub async fn trial(
    primary: Arc<TestCluster>,
    last: (u64, u64),
) -> Res<(Arc<TestCluster>, Measured, (u64, u64))> {
    let p = primary.clone();
    let standby = Arc::new(tokio::task::spawn_blocking(move || p.start_standby()).await??);
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let on_primary = connect(&primary.url("postgres")).await?;
    let names = ["holder", "waiter", "leader", "candidate"];
    let mut managers = Vec::new();
    for name in names.iter().map(|n| n.to_string()) {
        managers.push((manager(&url, &format!("bench-failover-{name}"))?, name));
    }
    for i in 0..IDLE_MANAGERS {
        managers.push((
            manager(&url, &format!("bench-failover-idle{i}"))?,
            format!("idle{i}"),
        ));
    }
    // Every manager holds a lock of its own (and so has a session).
    let mut own = Vec::new();
    for (m, name) in &managers {
        let g = m
            .acquire(&format!("bench/failover/{name}"), Some(LIMIT))
            .await?;
        own.push(after_loss(m.clone(), g));
    }
    let held = managers[0].0.acquire(KEY, Some(LIMIT)).await?;
    let token_before = held.fence().unwrap_or(0);
    let waiter = tokio::spawn(retake(managers[1].0.clone(), KEY.to_owned()));
    queued(&on_primary, KEY, 1).await?;
    let leading = Election::new(managers[2].0.clone(), ELECTION)
        .expect("a fencing lock manager")
        .campaign(Some(LIMIT))
        .await?;
    let term_before = leading.term();
    if term_before <= last.0 || token_before <= last.1 {
        return Err(
            format!("failover: term {term_before} / token {token_before} after {last:?}").into(),
        );
    }
    let mut candidate = tokio::spawn(lead(managers[3].0.clone()));
    queued(
        &on_primary,
        Election::new(managers[3].0.clone(), ELECTION)
            .expect("a fencing lock manager")
            .key(),
        1,
    )
    .await?;
    let mut deposed = {
        let m = managers[2].0.clone();
        tokio::spawn(async move {
            tokio::time::timeout(LIMIT, leading.lost()).await.ok();
            lead(m).await
        })
    };
    drop(on_primary);

    // The primary crashes; the standby is promoted. The clock starts when
    // the standby first says it is out of recovery.
    let p = primary.clone();
    tokio::task::spawn_blocking(move || p.stop(StopMode::Immediate)).await??;
    let poller = connect(&standby.url("postgres")).await?;
    let s = standby.clone();
    let promote = tokio::task::spawn_blocking(move || s.promote());
    // The promotion happened after the last poll that still saw recovery
    // was sent: counting from there, no figure is under its true value
    // (each may be over by up to `resolution`).
    let mut last_seen_in_recovery = Instant::now();
    let (t0, resolution) = loop {
        let sent = Instant::now();
        let in_recovery: bool = poller
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await?
            .get(0);
        if !in_recovery {
            break (last_seen_in_recovery, last_seen_in_recovery.elapsed());
        }
        last_seen_in_recovery = sent;
        tokio::time::sleep(Duration::from_micros(500)).await;
    };
    promote.await??;

    let mut reconnected = Duration::ZERO;
    let mut guards = Vec::new();
    for task in own {
        let (g, at) = task.await??;
        reconnected = reconnected.max(at.saturating_duration_since(t0));
        guards.push(g);
    }
    let (key_guard, at) = waiter.await??;
    let waited = at.saturating_duration_since(t0);
    let token_after = key_guard.fence().unwrap_or(0);
    // The first of the two candidates to lead; the other is still queued.
    let first = tokio::select! {
        r = &mut candidate => r,
        r = &mut deposed => r,
    };
    candidate.abort();
    deposed.abort();
    let (l, at) = first??;
    let led = at.saturating_duration_since(t0);
    if l.term() <= term_before || token_after <= token_before {
        return Err(format!(
            "failover: term {} after {term_before}, token {token_after} after {token_before}",
            l.term()
        )
        .into());
    }
    let seen = (l.term(), token_after);
    drop((l, key_guard, guards, held));
    for (m, _) in &managers {
        let _ = tokio::time::timeout(Duration::from_secs(5), m.close()).await;
    }
    let measured = Measured {
        reconnected,
        waiter: waited,
        leader: led,
        managers: managers.len(),
        resolution,
    };
    Ok((standby, measured, seen))
}
