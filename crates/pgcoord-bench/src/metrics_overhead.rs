//! The cost of the library's `metrics` feature:
//! `ours_seq` and `ours_conc64` with the feature off, on with no recorder,
//! and on with a real recorder (metrics-exporter-prometheus, no listener).
//!
//! Cargo unifies features per build, so the feature-off and feature-on
//! managers cannot share a binary: each round runs three fresh processes
//! back to back against the same database, this binary (built without the
//! feature) and the one given with `--metrics-bin` (built with
//! `--features metrics`), the latter once plain and once with
//! `--metrics-recorder`. Each prints its JSON report; the figures become
//! scenarios `metrics_{off,on,recorder}_{seq,conc64}` of this run, so their
//! ratios and per-round spreads come out like every other pair's.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, ScenarioReport};
use crate::Res;

/// (variant, which binary, extra argument).
const VARIANTS: [(&str, bool, Option<&str>); 3] = [
    ("off", false, None),
    ("on", true, None),
    ("recorder", true, Some("--metrics-recorder")),
];

/// (child scenario, suffix here).
const SCENARIOS: [(&str, &str); 2] = [("ours_seq", "seq"), ("ours_conc64", "conc64")];

/// Installs the Prometheus recorder when asked (`--metrics-recorder`).
pub fn install_recorder(asked: bool) -> Res<()> {
    if !asked {
        return Ok(());
    }
    #[cfg(feature = "metrics")]
    {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .map_err(|e| format!("cannot install the Prometheus recorder: {e}"))?;
        Ok(())
    }
    #[cfg(not(feature = "metrics"))]
    Err("--metrics-recorder needs a bench built with --features metrics".into())
}

/// Why the metrics scenarios cannot run (None: they can).
pub fn skip_reason(metrics_bin: Option<&Path>) -> Option<String> {
    if cfg!(feature = "metrics") {
        return Some(
            "this binary was built with --features metrics; the feature-off baseline \
             must be the default build"
                .into(),
        );
    }
    match metrics_bin {
        None => Some(
            "needs --metrics-bin PATH (the bench built with --features metrics; see \
             docs/performance.md)"
                .into(),
        ),
        Some(p) if !p.is_file() => Some(format!("--metrics-bin {}: no such file", p.display())),
        Some(_) => None,
    }
}

/// Runs `rounds` rounds of the three variants; returns one report per
/// variant and scenario, with `rounds_ops_per_sec` for the paired ratios.
pub async fn run(
    ctx: &Ctx,
    metrics_bin: &Path,
    rounds: usize,
) -> Res<BTreeMap<String, ScenarioReport>> {
    let own = std::env::current_exe()?;
    let dir = std::env::temp_dir().join(format!("bench-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // name -> per-round reports of the child
    let mut per_round: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for round in 0..rounds {
        for (variant, with_feature, extra) in VARIANTS {
            let exe = if with_feature {
                metrics_bin
            } else {
                own.as_path()
            };
            let json_path = dir.join(format!("{variant}-{round}.json"));
            let mut cmd = tokio::process::Command::new(exe);
            cmd.args(["--only", "ours_seq,ours_conc64", "--rounds", "1"])
                .args(["--sweep-rounds", "0", "--seconds"])
                .arg(ctx.measure.as_secs_f64().to_string())
                .arg("--json")
                .arg(&json_path)
                .args(extra)
                .env("DATABASE_URL", &ctx.url)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            let out = cmd.output().await?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                let last = err.lines().last().unwrap_or("").to_owned();
                return Err(
                    format!("metrics {variant} worker failed ({}): {last}", out.status).into(),
                );
            }
            let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_path)?)?;
            for (child, suffix) in SCENARIOS {
                let r = report["scenarios"][child].clone();
                if r.is_null() {
                    return Err(format!("metrics {variant} worker reported no {child}").into());
                }
                per_round
                    .entry(format!("metrics_{variant}_{suffix}"))
                    .or_default()
                    .push(r);
            }
        }
        eprintln!("  metrics round {}/{rounds} done", round + 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(per_round
        .into_iter()
        .map(|(name, rs)| (name, combine(&rs)))
        .collect())
}

/// One report from the per-round child reports: pairs/s over all rounds,
/// the median round's percentiles, client CPU per pair over all rounds.
fn combine(rs: &[Value]) -> ScenarioReport {
    let f = |r: &Value, k: &str| r[k].as_f64().unwrap_or(0.0);
    let ops: f64 = rs.iter().map(|r| f(r, "ops")).sum();
    let secs: f64 = rs.iter().map(|r| f(r, "seconds")).sum();
    let rounds: Vec<f64> = rs.iter().map(|r| f(r, "ops_per_sec")).collect();
    let cpu: f64 = rs
        .iter()
        .map(|r| f(r, "client_cpu_us_per_op") * f(r, "ops"))
        .sum();
    let mut by_ops: Vec<&Value> = rs.iter().collect();
    by_ops.sort_by(|a, b| f(a, "ops_per_sec").total_cmp(&f(b, "ops_per_sec")));
    let median = by_ops[by_ops.len() / 2];
    let mut extra = Map::new();
    extra.insert("rounds_ops_per_sec".into(), json!(rounds));
    extra.insert("ops".into(), json!(ops));
    extra.insert("seconds".into(), json!(secs));
    extra.insert("client_cpu_us_per_op".into(), json!(cpu / ops.max(1.0)));
    extra.insert("allocs_per_op".into(), median["allocs_per_op"].clone());
    extra.insert(
        "latency_of".into(),
        json!("one lock + unlock pair, in a fresh process per round; p50/p99 of the median round"),
    );
    ScenarioReport {
        ops_per_sec: if secs > 0.0 { ops / secs } else { 0.0 },
        p50_us: f(median, "p50_us"),
        p99_us: f(median, "p99_us"),
        connections: median["connections"].as_u64().unwrap_or(0) as u32,
        extra,
    }
}
