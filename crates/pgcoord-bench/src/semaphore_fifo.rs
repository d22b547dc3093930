//! `semaphore_fifo*`: in which order do queued waiters of a
//! `coordination::Semaphore` get their permits?
//!
//! Per round (after one warm-up round): a holder manager takes all
//! [`PERMITS`] permits; waiter 0 (on a manager of its own) queues and
//! becomes the head (it holds the turnstile, which `pg_locks` shows
//! granted); then waiters 1, 2, ... start
//! one at a time, each only once the previous one is seen queued on the
//! turnstile: in `pg_locks` (one wait per manager) and in its manager's
//! wait line (`waiting_tasks()`). The holder then gives its permits back;
//! each waiter takes its permit, notes its place in the grant order and
//! gives it back at once. Reported per round: inversions against the
//! arrival order (pairs served the wrong way round), the largest
//! displacement (|grant place - arrival place|), whether it was exactly in
//! order; over all rounds: the gap between consecutive grants.
//!
//! Waiters 1 and up (all but the head) sit on one of three layouts:
//! `semaphore_fifo_one_manager` (one manager: its wait line alone),
//! `semaphore_fifo_managers` (a manager each, as many processes would:
//! PostgreSQL's queue alone) and `semaphore_fifo` (4 managers, each
//! arrival on a manager picked at random: both queues at once).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::coordination::Semaphore;
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock};
use serde_json::json;
use tokio::sync::mpsc;

use crate::alloc::load_1m;
use crate::ctx::{Ctx, ScenarioReport};
use crate::order::{self, Order};
use crate::ours::manager;
use crate::probe::connect;
use crate::stats::pct_us_of;
use crate::targets::Target;
use crate::Res;

/// Permits of the semaphore, all held by the holder while the waiters queue.
pub const PERMITS: u32 = 2;
/// How long a waiter may take to show up as queued, or to get its permit.
const LIMIT: Duration = Duration::from_secs(30);

/// Where the waiters after the head sit.
#[derive(Debug, Clone, Copy)]
pub enum Layout {
    /// All on one manager.
    OneManager,
    /// Each on a manager of its own.
    OwnManagers,
    /// On `n` managers, each arrival on one picked at random.
    Random(usize),
}

impl Layout {
    fn tag(self) -> &'static str {
        match self {
            Layout::OneManager => "semaphore_fifo_one_manager",
            Layout::OwnManagers => "semaphore_fifo_managers",
            Layout::Random(_) => "semaphore_fifo",
        }
    }

    /// Waiters per round, the head included.
    fn waiters(self) -> usize {
        match self {
            // A manager per waiter: fewer, to stay well inside small servers'
            // max_connections (each manager opens up to 3 sessions here).
            Layout::OwnManagers => 16,
            _ => 24,
        }
    }

    fn managers(self) -> usize {
        match self {
            Layout::OneManager => 1,
            Layout::OwnManagers => self.waiters() - 1,
            Layout::Random(n) => n,
        }
    }

    /// The manager of waiter `i` (1 and up) in round `round`.
    fn manager_of(self, i: usize, round: usize) -> usize {
        match self {
            Layout::OneManager => 0,
            Layout::OwnManagers => i - 1,
            Layout::Random(n) => pick(round as u64 * 1_000 + i as u64, n),
        }
    }
}

/// A pseudo-random `0..n` from `seed` (splitmix64): the same every run.
fn pick(seed: u64, n: usize) -> usize {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % n as u64) as usize
}

/// Granted and waiting sessions on one advisory lock, from `pg_locks`.
struct LockLook {
    client: tokio_postgres::Client,
    stmt: tokio_postgres::Statement,
}

impl LockLook {
    async fn open(ctx: &Ctx) -> Res<Self> {
        let client = connect(&ctx.options, "bench/semaphore-look").await?;
        let stmt = client
            .prepare(
                "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) \
                 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 \
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                   AND ((classid::int8 << 32) | objid::int8) = $1",
            )
            .await?;
        Ok(Self { client, stmt })
    }

    /// Waits until `id` has at least `granted` holders and `waiting`
    /// waiters in `pg_locks`, and `line` (if any) at least `tasks` waiting
    /// tasks; false after [`LIMIT`].
    async fn wait_for(
        &self,
        id: i64,
        granted: i64,
        waiting: i64,
        line: Option<(&PostgresLockManager, usize)>,
    ) -> Res<bool> {
        let deadline = Instant::now() + LIMIT;
        loop {
            let row = self.client.query_one(&self.stmt, &[&id]).await?;
            let (g, w): (i64, i64) = (row.get(0), row.get(1));
            let lined = line.is_none_or(|(m, n)| m.waiting_tasks() >= n);
            if g >= granted && w >= waiting && lined {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::task::yield_now().await;
        }
    }
}

pub async fn semaphore_fifo(ctx: &Ctx, layout: Layout) -> Res<ScenarioReport> {
    let tag = layout.tag();
    let rounds = ctx.trials.unwrap_or(if ctx.quick { 5 } else { 20 }).max(1);
    let waiters = layout.waiters();
    let look = LockLook::open(ctx).await?;
    let holder = manager(ctx, &format!("bench-{tag}-holder"));
    let head = manager(ctx, &format!("bench-{tag}-head"));
    let managers: Vec<PostgresLockManager> = (0..layout.managers())
        .map(|m| manager(ctx, &format!("bench-{tag}-m{m}")))
        .collect();
    // Warm every manager (sessions open, statements prepared).
    for (i, m) in managers.iter().chain([&holder, &head]).enumerate() {
        m.acquire(&format!("bench/{tag}/warm/{i}"), None)
            .await?
            .release()
            .await?;
    }
    let mut orders: Vec<Order> = Vec::with_capacity(rounds);
    let mut gaps = Vec::with_capacity(rounds * waiters);
    let mut drains = Vec::with_capacity(rounds);
    let mut connections = 0u32;
    let (began, load0) = (Instant::now(), load_1m());
    // Round 0 is a warm-up, not recorded: the managers open the dedicated
    // sessions their waits need (later rounds reuse them).
    for round in 0..=rounds {
        let name = format!("bench/{tag}/{round}");
        let turnstile = lock_id_for_key(&Semaphore::<PostgresLockManager>::turnstile_key(&name));
        let held = Semaphore::new(holder.clone(), name.clone(), PERMITS)?;
        let mut permits = Vec::with_capacity(PERMITS as usize);
        for _ in 0..PERMITS {
            permits.push(
                held.try_acquire()
                    .await?
                    .ok_or("a permit of a fresh semaphore")?,
            );
        }
        let seq = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = mpsc::unbounded_channel::<(usize, usize, Instant)>();
        let mut tasks = Vec::with_capacity(waiters);
        let mut per_manager = vec![0usize; managers.len()];
        let mut assignment = Vec::with_capacity(waiters);
        for i in 0..waiters {
            let m = (i > 0).then(|| layout.manager_of(i, round));
            let mgr = m.map_or(&head, |m| &managers[m]);
            let sem = Semaphore::new(mgr.clone(), name.clone(), PERMITS)?;
            let (seq, tx) = (seq.clone(), tx.clone());
            tasks.push(tokio::spawn(async move {
                let permit = sem.acquire(Some(LIMIT)).await?;
                let place = seq.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send((place, i, Instant::now()));
                permit.release().await?;
                Res::Ok(())
            }));
            // Queued: the head holds the turnstile; every other waiter waits
            // on it, in PostgreSQL (one wait per manager) and in its
            // manager's wait line.
            let queued = match m {
                None => look.wait_for(turnstile, 1, 0, None).await?,
                Some(m) => {
                    per_manager[m] += 1;
                    let in_pg = per_manager.iter().filter(|&&n| n > 0).count() as i64;
                    let line = Some((&managers[m], per_manager[m]));
                    look.wait_for(turnstile, 1, in_pg, line).await?
                }
            };
            if !queued {
                return Err(format!("{tag}: waiter {i} never queued on {name}").into());
            }
            assignment.push(m);
        }
        drop(tx);
        connections = connections.max(
            ctx.monitor
                .sessions_like(&format!("eventsource/bench-{tag}-%"))
                .await?,
        );
        let t0 = Instant::now();
        for p in permits {
            p.release().await?;
        }
        let mut grants = Vec::with_capacity(waiters);
        while let Some(g) = rx.recv().await {
            grants.push(g);
        }
        for t in tasks {
            t.await??;
        }
        grants.sort_by_key(|g| g.0);
        let mut last = t0;
        let mut round_gaps = Vec::with_capacity(waiters);
        for &(_, _, at) in &grants {
            round_gaps.push(at.saturating_duration_since(last));
            last = at;
        }
        let served: Vec<usize> = grants.iter().map(|g| g.1).collect();
        if served.len() != waiters {
            return Err(format!("{tag}: {} of {waiters} waiters served", served.len()).into());
        }
        if round == 0 {
            continue;
        }
        gaps.extend(round_gaps);
        drains.push(last.saturating_duration_since(t0));
        orders.push(Order::of(served, assignment));
    }
    let elapsed = began.elapsed();
    for m in managers.iter().chain([&holder, &head]) {
        m.close().await?;
    }
    let mut extra = order::summary(&orders);
    extra.insert("load_1m".into(), json!([load0, load_1m()]));
    extra.insert("waiters".into(), json!(waiters));
    extra.insert("managers".into(), json!(layout.managers()));
    extra.insert("permits".into(), json!(PERMITS));
    extra.insert("drain_p50_ms".into(), json!(pct_us_of(&drains, 50.0) / 1e3));
    extra.insert("gap_p90_us".into(), json!(pct_us_of(&gaps, 90.0)));
    extra.insert("gap_max_us".into(), json!(pct_us_of(&gaps, 100.0)));
    extra.insert(
        "latency_of".into(),
        json!("the gap between two consecutive grants while the queue drains (the first: from the holder's release)"),
    );
    Ok(ScenarioReport {
        ops_per_sec: ((rounds + 1) * waiters) as f64 / elapsed.as_secs_f64(),
        p50_us: pct_us_of(&gaps, 50.0),
        p99_us: pct_us_of(&gaps, 99.0),
        connections,
        extra,
    })
}

/// Prints one line per semaphore-order scenario that ran.
pub fn print(s: &std::collections::BTreeMap<String, ScenarioReport>) {
    for layout in [Layout::OneManager, Layout::OwnManagers, Layout::Random(4)] {
        if let Some(r) = s.get(layout.tag()) {
            order::print(layout.tag(), r);
        }
    }
}

/// Served in arrival order in every round: what `docs/primitives.md`
/// promises among waiters ("first come, first served").
pub fn targets(s: &std::collections::BTreeMap<String, ScenarioReport>) -> Vec<Target> {
    let names: [(&str, &'static str); 3] = [
        (Layout::OneManager.tag(), "semaphore_fifo_one_manager order"),
        (Layout::OwnManagers.tag(), "semaphore_fifo_managers order"),
        (Layout::Random(4).tag(), "semaphore_fifo order"),
    ];
    names
        .into_iter()
        .filter_map(|(tag, name)| {
            let v = s.get(tag)?.extra.get("in_order_fraction")?.as_f64()?;
            Some(Target {
                name,
                target: "= 1.0 of rounds in arrival order",
                value: v,
                met: v == 1.0,
                per_round: None,
            })
        })
        .collect()
}
