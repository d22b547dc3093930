//! Leader election hand-overs: how long an election stays
//! without a leader.
//!
//! - `election_failover`: the leader is another process (this binary,
//!   started with `--election-leader`, see `election_leader.rs`); a
//!   candidate of the bench process campaigns and is seen queued in
//!   `pg_locks`; then the leader gets SIGKILL. Measured: from the `kill()`
//!   call to the candidate's `campaign` returning its `Leadership` (the
//!   server has to notice the dead connection, end the backend, free its
//!   lock and grant it to the queued candidate, whose grant also takes the
//!   next term). Also: `kill()` to the child reaped, for scale.
//! - `election_resign`: leader and candidate are two managers of the bench
//!   process; from the leader's `resign()` call to the queued candidate
//!   leading. Each trial also times the same fenced hand-over in plain SQL
//!   (`election_raw.rs`): what PostgreSQL allows on this machine now.
//!
//! Both check that every new term is greater than the one before. Each
//! reports p50 / p90 / p99 / max over its trials and the spread of the
//! p50 of each block of [`BLOCK`] trials (the "rounds").

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pgcoord::coordination::Election;
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::alloc::load_1m;
use crate::ctx::{Ctx, ScenarioReport};
use crate::election_leader::{LeaderSpec, Leading};
use crate::election_raw::RawHandover;
use crate::ours::manager_with;
use crate::report::spread;
use crate::stats::pct_us_of;
use crate::targets::Target;
use crate::Res;

/// How long a leader may take to start and lead, a candidate to queue or to lead.
const LIMIT: Duration = Duration::from_secs(30);
/// Trials per block ("round") for the spread.
const BLOCK: usize = 10;
/// Trials run first and not recorded (sessions opened, statements prepared).
const WARM: usize = 2;

/// A fencing manager of the bench process, warmed (its sessions open).
async fn candidate(ctx: &Ctx, holder: &str) -> Res<PostgresLockManager> {
    let m = manager_with(ctx, holder, true);
    crate::cleanup::install_fencing(ctx.monitor.client(), m.install_fencing()).await?;
    m.acquire(&format!("bench/{holder}/warm"), None)
        .await?
        .release()
        .await?;
    Ok(m)
}

/// Starts a leader process of `election` and waits for it to lead.
async fn start_leader(ctx: &Ctx, election: &str) -> Res<(tokio::process::Child, Leading)> {
    let spec = LeaderSpec {
        url: ctx.url.clone(),
        transport: ctx.transport,
        election: election.to_owned(),
        holder_id: "bench-election-leader".into(),
        batched_sessions: ctx.batched_sessions,
    };
    let mut child = crate::child::command(&std::env::current_exe()?, "--election-leader", &spec)?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("leader stdout not piped")?;
    let line = tokio::time::timeout(LIMIT, BufReader::new(stdout).lines().next_line())
        .await
        .map_err(|_| "the leader process did not lead in time")??
        .ok_or("the leader process exited before leading")?;
    let leading: Leading = serde_json::from_str(&line)
        .map_err(|e| format!("the leader process printed {line:?}: {e}"))?;
    Ok((child, leading))
}

/// Campaigns in a task of its own; the instant it led comes with the leadership.
fn campaign(
    election: Election<PostgresLockManager>,
) -> tokio::task::JoinHandle<Res<(pgcoord::coordination::Leadership, Instant)>> {
    tokio::spawn(async move {
        let leadership = election.campaign(Some(LIMIT)).await?;
        Ok((leadership, Instant::now()))
    })
}

pub async fn election_failover(ctx: &Ctx) -> Res<ScenarioReport> {
    let trials = ctx.trials.unwrap_or(if ctx.quick { 10 } else { 40 }).max(1);
    let cand = candidate(ctx, "bench-election-candidate").await?;
    let name = "bench/election_failover";
    let id = lock_id_for_key(
        Election::new(cand.clone(), name)
            .expect("a fencing lock manager")
            .key(),
    );
    let (mut failovers, mut reaps) = (Vec::with_capacity(trials), Vec::with_capacity(trials));
    let mut last_term = 0u64;
    let mut connections = 0;
    let (began, load0) = (Instant::now(), load_1m());
    for trial in 0..WARM + trials {
        let (mut child, led) = start_leader(ctx, name).await?;
        if led.term <= last_term {
            return Err(format!("election_failover: term {} after {last_term}", led.term).into());
        }
        let task = campaign(Election::new(cand.clone(), name).expect("a fencing lock manager"));
        if !ctx.monitor.wait_for_waiters(id, 1, LIMIT).await? {
            return Err("election_failover: the candidate never queued".into());
        }
        if trial == WARM {
            connections = ctx
                .monitor
                .sessions_like("eventsource/bench-election-%")
                .await?;
        }
        let t0 = Instant::now();
        child.start_kill()?;
        child.wait().await?;
        let reaped = t0.elapsed();
        let (leadership, at) = task.await??;
        if leadership.term() <= led.term {
            return Err(format!(
                "election_failover: the candidate's term {} is not above the killed leader's {}",
                leadership.term(),
                led.term
            )
            .into());
        }
        last_term = leadership.term();
        if trial >= WARM {
            failovers.push(at.saturating_duration_since(t0));
            reaps.push(reaped);
        }
        leadership.resign().await?;
    }
    let elapsed = began.elapsed();
    cand.close().await?;
    let mut extra = spread_of(&failovers, load0);
    extra.insert("reaped_p50_us".into(), json!(pct_us_of(&reaps, 50.0)));
    extra.insert("reaped_p99_us".into(), json!(pct_us_of(&reaps, 99.0)));
    extra.insert(
        "latency_of".into(),
        json!("SIGKILL of the leader process (kill() call) to the queued candidate's campaign returning"),
    );
    Ok(report(
        &failovers,
        WARM + trials,
        elapsed,
        connections,
        extra,
    ))
}

pub async fn election_resign(ctx: &Ctx) -> Res<ScenarioReport> {
    let trials = ctx
        .trials
        .unwrap_or(if ctx.quick { 50 } else { 200 })
        .max(1);
    let leader = candidate(ctx, "bench-election-resign-leader").await?;
    let cand = candidate(ctx, "bench-election-resign-candidate").await?;
    let name = "bench/election_resign";
    let id = lock_id_for_key(
        Election::new(cand.clone(), name)
            .expect("a fencing lock manager")
            .key(),
    );
    let raw = RawHandover::open(ctx).await?;
    let (mut handovers, mut calls) = (Vec::with_capacity(trials), Vec::with_capacity(trials));
    let mut raws = Vec::with_capacity(trials);
    let mut last_term = 0u64;
    let mut connections = 0;
    let (began, load0) = (Instant::now(), load_1m());
    for trial in 0..WARM + trials {
        let leading = Election::new(leader.clone(), name)
            .expect("a fencing lock manager")
            .campaign(Some(LIMIT))
            .await?;
        let task = campaign(Election::new(cand.clone(), name).expect("a fencing lock manager"));
        if !ctx.monitor.wait_for_waiters(id, 1, LIMIT).await? {
            return Err("election_resign: the candidate never queued".into());
        }
        if trial == WARM {
            connections = ctx
                .monitor
                .sessions_like("eventsource/bench-election-resign-%")
                .await?;
        }
        let term = leading.term();
        let t0 = Instant::now();
        leading.resign().await?;
        let call = t0.elapsed();
        let (next, at) = task.await??;
        if term <= last_term || next.term() <= term {
            return Err(format!(
                "election_resign: terms {last_term}, {term}, {} do not grow",
                next.term()
            )
            .into());
        }
        last_term = next.term();
        next.resign().await?;
        let raw_handover = raw.trial(ctx, LIMIT).await?;
        if trial >= WARM {
            handovers.push(at.saturating_duration_since(t0));
            calls.push(call);
            raws.push(raw_handover);
        }
    }
    let elapsed = began.elapsed();
    leader.close().await?;
    cand.close().await?;
    let mut extra = spread_of(&handovers, load0);
    extra.insert("resign_call_p50_us".into(), json!(pct_us_of(&calls, 50.0)));
    extra.insert("resign_call_p99_us".into(), json!(pct_us_of(&calls, 99.0)));
    for (k, p) in [
        ("raw_p50_us", 50.0),
        ("raw_p90_us", 90.0),
        ("raw_p99_us", 99.0),
    ] {
        extra.insert(k.into(), json!(pct_us_of(&raws, p)));
    }
    extra.insert(
        "latency_of".into(),
        json!("the leader's resign() call to the queued candidate's campaign returning"),
    );
    Ok(report(
        &handovers,
        WARM + trials,
        elapsed,
        connections,
        extra,
    ))
}

/// Percentiles over all trials, the p50 of each block of [`BLOCK`]
/// trials, and the machine's load before (`load0`) and after.
fn spread_of(samples: &[Duration], load0: Option<f64>) -> Map<String, Value> {
    let mut blocks: Vec<f64> = samples.chunks(BLOCK).map(|b| pct_us_of(b, 50.0)).collect();
    blocks.sort_by(f64::total_cmp);
    let mut m = Map::new();
    m.insert("trials".into(), json!(samples.len()));
    m.insert("p90_us".into(), json!(pct_us_of(samples, 90.0)));
    m.insert("max_us".into(), json!(pct_us_of(samples, 100.0)));
    m.insert("min_us".into(), json!(pct_us_of(samples, 0.0)));
    m.insert("load_1m".into(), json!([load0, load_1m()]));
    m.insert("block_trials".into(), json!(BLOCK));
    m.insert("block_p50_us".into(), json!(blocks));
    m.insert("block_p50_us_spread".into(), json!(spread(&blocks)));
    m.insert(
        "samples_us".into(),
        json!(samples
            .iter()
            .map(|d| (d.as_nanos() as f64 / 100.0).round() / 10.0)
            .collect::<Vec<_>>()),
    );
    m
}

/// The report line: `ops_per_sec` is trials (warm-up included) per second
/// of the whole scenario, as for `handoff`.
fn report(
    samples: &[Duration],
    runs: usize,
    elapsed: Duration,
    connections: u32,
    extra: Map<String, Value>,
) -> ScenarioReport {
    ScenarioReport {
        ops_per_sec: runs as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_us: pct_us_of(samples, 50.0),
        p99_us: pct_us_of(samples, 99.0),
        connections,
        extra,
    }
}

/// The goals for the two hand-overs.
pub fn targets(s: &BTreeMap<String, ScenarioReport>) -> Vec<Target> {
    let mut out = Vec::new();
    if let Some(r) = s.get("election_failover") {
        let ms = r.p99_us / 1e3;
        out.push(Target {
            name: "election_failover p99 ms",
            target: "<= 20 (SIGKILL to new leader)",
            value: ms,
            met: ms <= 20.0,
            per_round: None,
        });
    }
    if let Some(r) = s.get("election_resign") {
        out.push(Target {
            name: "election_resign p99 us",
            target: "<= 1000 (resign to new leader)",
            value: r.p99_us,
            met: r.p99_us <= 1000.0,
            per_round: None,
        });
    }
    out
}

/// One line per election scenario that ran.
pub fn print(s: &BTreeMap<String, ScenarioReport>) {
    for name in ["election_failover", "election_resign"] {
        let Some(r) = s.get(name) else { continue };
        let f = |k: &str| r.extra.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        let blocks = r
            .extra
            .get("block_p50_us_spread")
            .and_then(Value::as_array)
            .map(|a| {
                let v: Vec<String> = a
                    .iter()
                    .map(|x| format!("{:.0}", x.as_f64().unwrap_or(f64::NAN)))
                    .collect();
                v.join(" / ")
            })
            .unwrap_or_default();
        println!(
            "{name}: {:.0} trials; new leader after p50 {:.0} / p90 {:.0} / p99 {:.0} / max {:.0} us; \
             p50 per {BLOCK} trials min / median / max {blocks} us",
            f("trials"),
            r.p50_us,
            f("p90_us"),
            r.p99_us,
            f("max_us"),
        );
        if name == "election_resign" {
            println!(
                "election_resign: resign() call p50 {:.0} / p99 {:.0} us; the same fenced hand-over \
                 in plain SQL (paired trials) p50 {:.0} / p90 {:.0} / p99 {:.0} us",
                f("resign_call_p50_us"),
                f("resign_call_p99_us"),
                f("raw_p50_us"),
                f("raw_p90_us"),
                f("raw_p99_us"),
            );
        }
        if name == "election_failover" {
            println!(
                "election_failover: kill() to the leader process reaped p50 {:.0} / p99 {:.0} us",
                f("reaped_p50_us"),
                f("reaped_p99_us")
            );
        }
    }
}
