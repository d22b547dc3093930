//! `holders10k`: what one call of `PostgresLockManager::holders()` (one
//! query joining `pg_locks` with `pg_stat_activity`) costs on a server that
//! holds 10,000 advisory locks, as `eventsource lock top` and
//! `lock holders --watch` make it once per refresh.

use std::time::{Duration, Instant};

use pgcoord::lock_id_for_key;
use pgcoord::{inspect::HoldersQuery, PostgresLockManager};
use serde_json::{json, Map};

use crate::ctx::{Ctx, ScenarioReport, HELD_LOCKS};
use crate::probe::connect;
use crate::stats::pct_us_of;
use crate::Res;

/// Sessions that hold the 10,000 locks between them (so the join meets
/// several backends, as on a real server).
const HOLDING_SESSIONS: usize = 4;

/// Keys of the held locks, named so that a filtered call can ask for one.
fn key(i: usize) -> String {
    format!("bench/holders10k/{i}")
}

/// Five ways of asking, each timed over `calls` calls after 2 warm-up calls:
/// every lock (`holders(&[])`, 10,000 entries back) on the manager's default
/// path (a short-lived session per call, so the connect is in the time);
/// the same on a single-session manager (the query on an open session:
/// what a refreshing view pays per refresh); one named key; and
/// `HoldersQuery::all()` on an open plain session, as `lock top` runs it,
/// without and with the fencing-table join (`with_fences`).
pub async fn holders10k(ctx: &Ctx) -> Res<ScenarioReport> {
    let calls = if ctx.quick { 5 } else { 30 };
    let mut holding = Vec::with_capacity(HOLDING_SESSIONS);
    let per_session = HELD_LOCKS / HOLDING_SESSIONS;
    let t0 = Instant::now();
    for s in 0..HOLDING_SESSIONS {
        let client = connect(&ctx.options, &format!("eventsource/bench-holders10k-{s}")).await?;
        let ids: Vec<i64> = (s * per_session..(s + 1) * per_session)
            .map(|i| lock_id_for_key(&key(i)))
            .collect();
        let got: i64 = client
            .query_one(
                "SELECT count(*) FILTER (WHERE pg_try_advisory_lock(k)) FROM unnest($1::int8[]) AS t(k)",
                &[&ids],
            )
            .await?
            .get(0);
        if got != ids.len() as i64 {
            return Err(format!("holders10k: took {got} of {} locks", ids.len()).into());
        }
        holding.push(client);
    }
    let fill_ms = t0.elapsed().as_secs_f64() * 1e3;

    let default_mgr = PostgresLockManager::builder(ctx.options.clone())
        .holder_id("bench-holders10k-reader")
        .build()
        .unwrap();
    let single_mgr = PostgresLockManager::builder(ctx.options.clone())
        .holder_id("bench-holders10k-single")
        .single_session(true)
        .build()
        .unwrap();
    let one = [key(17)];
    let one: Vec<&str> = one.iter().map(String::as_str).collect();

    let mut extra = Map::new();
    let mut all_default = Vec::new();
    for (label, mgr, keys) in [
        ("all", &default_mgr, &[][..]),
        ("all_single_session", &single_mgr, &[][..]),
        ("one_key", &default_mgr, &one[..]),
    ] {
        let mut times = Vec::with_capacity(calls);
        let mut seen = 0usize;
        for call in 0..calls + 2 {
            let t = Instant::now();
            let locks = mgr.holders(keys).await?;
            let took = t.elapsed();
            let held: usize = locks.iter().map(|l| l.holders.len()).sum();
            let want = if keys.is_empty() { HELD_LOCKS } else { 1 };
            if held < want {
                return Err(
                    format!("holders10k {label}: saw {held} held locks, {want} expected").into(),
                );
            }
            seen = locks.len();
            if call >= 2 {
                times.push(took);
            }
        }
        if label == "all" {
            all_default = times.clone();
        }
        extra.insert(label.into(), summary(&times, seen));
    }
    // What `eventsource lock top` and `lock holders --watch` run per refresh:
    // one `HoldersQuery` on an open session, with and without the fence join.
    let viewer = connect(&ctx.options, "bench/holders10k-view").await?;
    let plain = HoldersQuery::all();
    let fenced = HoldersQuery::all().with_fences(&viewer).await?;
    for (label, query) in [("view_query", &plain), ("view_query_fences", &fenced)] {
        let mut times = Vec::with_capacity(calls);
        let mut seen = 0usize;
        for call in 0..calls + 2 {
            let t = Instant::now();
            let locks = query.run(&viewer).await?;
            let took = t.elapsed();
            let held: usize = locks.iter().map(|l| l.holders.len()).sum();
            if held < HELD_LOCKS {
                return Err(format!("holders10k {label}: saw {held} held locks").into());
            }
            seen = locks.len();
            if call >= 2 {
                times.push(took);
            }
        }
        extra.insert(label.into(), summary(&times, seen));
    }
    default_mgr.close().await?;
    single_mgr.close().await?;
    drop(holding);
    extra.insert("calls".into(), json!(calls));
    extra.insert("held".into(), json!(HELD_LOCKS));
    extra.insert("holding_sessions".into(), json!(HOLDING_SESSIONS));
    extra.insert("fill_ms".into(), json!(fill_ms));
    extra.insert(
        "latency_of".into(),
        json!("one holders(&[]) call on the default manager (a session opened per call), 10,000 locks held on the server; see all_single_session and one_key for the others"),
    );
    Ok(ScenarioReport {
        ops_per_sec: all_default.len() as f64
            / all_default.iter().sum::<Duration>().as_secs_f64().max(1e-9),
        p50_us: pct_us_of(&all_default, 50.0),
        p99_us: pct_us_of(&all_default, 99.0),
        connections: HOLDING_SESSIONS as u32,
        extra,
    })
}

/// Time per call in ms: min, p50, p90, max, and how many locks came back.
fn summary(times: &[Duration], locks_returned: usize) -> serde_json::Value {
    let ms = |p: f64| pct_us_of(times, p) / 1e3;
    json!({
        "min_ms": ms(0.0),
        "p50_ms": ms(50.0),
        "p90_ms": ms(90.0),
        "max_ms": ms(100.0),
        "locks_returned": locks_returned,
    })
}

/// Prints the three timings.
pub fn print(r: &ScenarioReport) {
    for label in [
        "all",
        "all_single_session",
        "one_key",
        "view_query",
        "view_query_fences",
    ] {
        let Some(v) = r.extra.get(label) else {
            continue;
        };
        let f = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
        println!(
            "holders10k {label:<19} per call min {:.1} / p50 {:.1} / p90 {:.1} / max {:.1} ms ({} locks returned)",
            f("min_ms"),
            f("p50_ms"),
            f("p90_ms"),
            f("max_ms"),
            v.get("locks_returned").cloned().unwrap_or_default()
        );
    }
}
