//! `failover`: how long after a promotion the managers, a waiter and an
//! election are back in business.
//!
//! Each trial (see `failover_trial.rs`) runs on private servers this
//! scenario starts itself: a primary and a streaming standby made for the
//! trial (`pg_basebackup -R`); the promoted standby is the next trial's
//! primary. Eight fencing managers are given both hosts
//! (`target_session_attrs=read-write`): each holds a lock, one more holds
//! the contended key and another waits for it, one leads an election and
//! another campaigns behind it. Then the primary is stopped in immediate
//! mode (a crash) and the standby promoted. Measured from the moment the
//! promoted standby starts accepting writes (`pg_is_in_recovery()` polled
//! every 0.5 ms; the clock starts when the last poll that still saw
//! recovery was sent, so a figure can be over its true value by the
//! polls' resolution, reported, but never under it) to:
//!
//! - **reconnected**: every manager holds its own lock again (the last one);
//! - **waiter**: the manager that was queued for the key holds it;
//! - **leader**: a candidate leads the election again (the first one).
//!
//! The managers retry with a pause of [`RETRY`] (as a user's retry loop
//! would), so each figure includes up to that pause. Each trial checks that
//! the new term and token are above those before the failover.
//!
//! It kills servers, so it never runs against `DATABASE_URL`, and it takes
//! minutes, so it runs only when asked: `--only failover`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgcoord::PostgresLockManager;
use pgcoord_testkit::pg::TestCluster;
use serde_json::{json, Map, Value};

use crate::alloc::load_1m;
use crate::ctx::{Ctx, ScenarioReport};
use crate::failover_trial::{trial, Measured, RETRY};
use crate::stats::pct_us_of;
use crate::targets::Target;
use crate::Res;

/// Trials run first and not recorded (the first server's caches are cold).
const WARM: usize = 1;

/// Why `failover` cannot run here, if it cannot.
pub fn skip_reason(ctx: &Ctx) -> Option<String> {
    (!ctx.private_server).then(|| {
        "it stops and promotes servers, so it runs only on the private clusters it starts \
         itself: unset DATABASE_URL (it still needs the PostgreSQL server binaries)"
            .to_owned()
    })
}

pub async fn failover(ctx: &Ctx) -> Res<ScenarioReport> {
    let trials = ctx.trials.unwrap_or(20).max(1);
    let mut primary = Arc::new(tokio::task::spawn_blocking(TestCluster::start).await??);
    let installer = PostgresLockManager::builder(primary.url("postgres").parse()?)
        .fencing(true)
        .build()
        .unwrap();
    installer.install_fencing().await?;
    installer.close().await?;
    let mut samples: Vec<Measured> = Vec::with_capacity(trials);
    let mut last = (0, 0);
    let (began, load0) = (Instant::now(), load_1m());
    for n in 0..WARM + trials {
        let (next, measured, seen) = trial(primary, last).await?;
        eprintln!(
            "  failover trial {}/{}: reconnected {:.0} ms, waiter {:.0} ms, leader {:.0} ms",
            n + 1,
            WARM + trials,
            ms(measured.reconnected),
            ms(measured.waiter),
            ms(measured.leader)
        );
        (primary, last) = (next, seen);
        if n >= WARM {
            samples.push(measured);
        }
    }
    let elapsed = began.elapsed();
    let of = |f: fn(&Measured) -> Duration| samples.iter().map(f).collect::<Vec<_>>();
    let (reconnected, waiter, leader) = (of(|m| m.reconnected), of(|m| m.waiter), of(|m| m.leader));
    let resolution = of(|m| m.resolution);
    let mut extra = Map::new();
    extra.insert("trials".into(), json!(samples.len()));
    extra.insert("managers".into(), json!(samples[0].managers));
    extra.insert("retry_pause_ms".into(), json!(RETRY.as_millis()));
    extra.insert("load_1m".into(), json!([load0, load_1m()]));
    extra.insert(
        "resolution_p50_us".into(),
        json!(pct_us_of(&resolution, 50.0)),
    );
    extra.insert(
        "resolution_max_us".into(),
        json!(pct_us_of(&resolution, 100.0)),
    );
    for (name, s) in [
        ("reconnected", &reconnected),
        ("waiter", &waiter),
        ("leader", &leader),
    ] {
        for p in [50.0, 90.0, 99.0, 100.0] {
            let k = if p == 100.0 {
                format!("{name}_max_us")
            } else {
                format!("{name}_p{p}_us")
            };
            extra.insert(k, json!(pct_us_of(s, p)));
        }
        let ms: Vec<f64> = s.iter().map(|d| (ms(*d) * 10.0).round() / 10.0).collect();
        extra.insert(format!("{name}_samples_ms"), json!(ms));
    }
    extra.insert(
        "latency_of".into(),
        json!(
            "the promoted standby first out of recovery to a new leader (p50/p99); \
               reconnected_* and waiter_* likewise to every manager's lock, the queued waiter's"
        ),
    );
    Ok(ScenarioReport {
        ops_per_sec: (WARM + trials) as f64 / elapsed.as_secs_f64().max(1e-9),
        p50_us: pct_us_of(&leader, 50.0),
        p99_us: pct_us_of(&leader, 99.0),
        connections: samples[0].managers as u32,
        extra,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn get(r: &ScenarioReport, k: &str) -> f64 {
    r.extra.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Goal: each p99 within a second of the promotion.
pub fn targets(s: &BTreeMap<String, ScenarioReport>) -> Vec<Target> {
    let Some(r) = s.get("failover") else {
        return Vec::new();
    };
    [
        ("failover reconnected p99 ms", "reconnected_p99_us"),
        ("failover waiter p99 ms", "waiter_p99_us"),
        ("failover leader p99 ms", "leader_p99_us"),
    ]
    .into_iter()
    .map(|(name, k)| {
        let v = get(r, k) / 1e3;
        Target {
            name,
            target: "<= 1000 (promotion to back in business)",
            value: v,
            met: v <= 1000.0,
            per_round: None,
        }
    })
    .collect()
}

/// One line per figure of `failover`, if it ran.
pub fn print(s: &BTreeMap<String, ScenarioReport>) {
    let Some(r) = s.get("failover") else { return };
    println!(
        "failover: {:.0} promotions, {:.0} managers (retry pause {:.0} ms); from the promoted \
         standby accepting writes (clock start resolution p50 {:.1} / max {:.1} ms):",
        get(r, "trials"),
        get(r, "managers"),
        get(r, "retry_pause_ms"),
        get(r, "resolution_p50_us") / 1e3,
        get(r, "resolution_max_us") / 1e3,
    );
    for (name, what) in [
        ("reconnected", "every manager reconnected"),
        ("waiter", "the queued waiter holds the key"),
        ("leader", "a new leader in office"),
    ] {
        println!(
            "  {what:<34} p50 {:>6.0} / p90 {:>6.0} / p99 {:>6.0} / max {:>6.0} ms",
            get(r, &format!("{name}_p50_us")) / 1e3,
            get(r, &format!("{name}_p90_us")) / 1e3,
            get(r, &format!("{name}_p99_us")) / 1e3,
            get(r, &format!("{name}_max_us")) / 1e3,
        );
    }
}
