//! The performance targets, checked against one run.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::ctx::ScenarioReport;
use crate::report::spread;

#[derive(Debug, Serialize)]
pub struct Target {
    pub name: &'static str,
    pub target: &'static str,
    pub value: f64,
    pub met: bool,
    /// Per-round (min, median, max) for ratios.
    pub per_round: Option<(f64, f64, f64)>,
}

type Check = fn(f64) -> bool;

/// Ratio targets: (ratio, target text, check).
const RATIO_TARGETS: [(&str, &str, Check); 19] = [
    ("ours_seq/sqlx_seq", ">= 1.0", |v| v >= 1.0),
    ("ours_seq/raw_seq_inline", ">= 0.95", |v| v >= 0.95),
    ("ours_conc64/raw_pipelined64", ">= 3.5", |v| v >= 3.5),
    ("ours_conc1024/raw_batched", ">= 0.5", |v| v >= 0.5),
    ("held10k/ours_conc64", ">= 0.5", |v| v >= 0.5),
    // Issue 20: B keeps half its solo rate beside A's dropped waits.
    ("abandoned/abandoned_alone", ">= 0.5", |v| v >= 0.5),
    // "Beat every peer on every scenario".
    ("contention/contention_sqlx", ">= 1.0", |v| v >= 1.0),
    // Issue 11: at most one extra round trip per acquisition.
    ("ours_seq_fenced/ours_seq", ">= 0.8", |v| v >= 0.8),
    ("ours_conc64_fenced/ours_conc64", ">= 0.7", |v| v >= 0.7),
    ("write_fenced/write_plain", ">= 0.8", |v| v >= 0.8),
    // Fenced grants against their plain-SQL limit (with the epoch), and
    // the epoch's own cost.
    ("ours_seq_fenced/raw_seq_fenced_epoch", ">= 0.9", |v| {
        v >= 0.9
    }),
    (
        "ours_conc64_fenced/raw_pipelined64_fenced_epoch",
        ">= 0.9",
        |v| v >= 0.9,
    ),
    ("raw_seq_fenced_epoch/raw_seq_fenced", ">= 0.95", |v| {
        v >= 0.95
    }),
    (
        "raw_pipelined64_fenced_epoch/raw_pipelined64_fenced",
        ">= 0.95",
        |v| v >= 0.95,
    ),
    ("write_fenced_pipelined/write_plain", ">= 0.8", |v| v >= 0.8),
    // Issue 13: the metrics feature on, without and with a recorder.
    ("metrics_on_seq/metrics_off_seq", ">= 0.98", |v| v >= 0.98),
    ("metrics_recorder_seq/metrics_off_seq", ">= 0.9", |v| {
        v >= 0.9
    }),
    ("metrics_on_conc64/metrics_off_conc64", ">= 0.98", |v| {
        v >= 0.98
    }),
    (
        "metrics_recorder_conc64/metrics_off_conc64",
        ">= 0.9",
        |v| v >= 0.9,
    ),
];

pub fn targets(
    s: &BTreeMap<String, ScenarioReport>,
    ratios: &BTreeMap<String, f64>,
    round_ratios: &BTreeMap<String, Vec<f64>>,
) -> Vec<Target> {
    let mut out = Vec::new();
    for (name, target, met) in RATIO_TARGETS {
        if let Some(&v) = ratios.get(name) {
            out.push(Target {
                name,
                target,
                value: v,
                met: met(v),
                per_round: round_ratios.get(name).map(|r| spread(r)),
            });
        }
    }
    let extra = |name: &str, field: &str| {
        s.get(name)
            .and_then(|r| r.extra.get(field))
            .and_then(Value::as_f64)
    };
    let max2 = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let plain: [(&'static str, &'static str, Option<f64>, Check); 6] = [
        (
            "abandoned: A's max sessions",
            "<= 4 (goal; bound 2 shared + 1 x 1 key)",
            max2(
                extra("abandoned", "a_max_sessions"),
                extra("abandoned", "a_max_sessions_in_db"),
            ),
            |v| v <= 4.0,
        ),
        (
            "contention: sessions per process",
            "<= 6 (2 shared + 1 x 4 keys)",
            extra("contention", "max_sessions_per_process"),
            |v| v <= 6.0,
        ),
        (
            "handoff p50 us",
            "<= 200",
            s.get("handoff").map(|r| r.p50_us),
            |v| v <= 200.0,
        ),
        ("fifo in order", "= 1.0", extra("fifo", "in_order"), |v| {
            v == 1.0
        }),
        (
            "capacity connections",
            "<= 2",
            s.get("capacity").map(|r| r.connections as f64),
            |v| v <= 2.0,
        ),
        (
            "capacity client bytes/lock",
            "<= 256",
            extra("capacity", "client_bytes_per_lock"),
            |v| v <= 256.0,
        ),
    ];
    for (name, target, value, met) in plain {
        if let Some(v) = value {
            out.push(Target {
                name,
                target,
                value: v,
                met: met(v),
                per_round: None,
            });
        }
    }
    out
}

pub fn print_targets(targets: &[Target]) {
    println!();
    for t in targets {
        let spread = t
            .per_round
            .map(|(lo, med, hi)| format!("  per round {lo:.2} / {med:.2} / {hi:.2}"))
            .unwrap_or_default();
        println!(
            "target {:<34} {:<30} value {:>9.2}  {}{spread}",
            t.name,
            t.target,
            t.value,
            if t.met { "MET" } else { "MISSED" }
        );
    }
}
