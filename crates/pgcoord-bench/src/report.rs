//! Turning aggregates into report lines, and printing them.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::ctx::ScenarioReport;
use crate::raw;
use crate::stats::Aggregate;

pub fn throughput_report(name: &str, agg: &Aggregate) -> ScenarioReport {
    let ops = agg.ops.max(1) as f64;
    let mut extra = Map::new();
    extra.insert("p90_us".into(), json!(agg.pct_us(90.0)));
    extra.insert("p999_us".into(), json!(agg.pct_us(99.9)));
    extra.insert("max_us".into(), json!(agg.pct_us(100.0)));
    extra.insert("ops".into(), json!(agg.ops));
    extra.insert("seconds".into(), json!(agg.elapsed.as_secs_f64()));
    extra.insert("rounds_ops_per_sec".into(), json!(agg.round_ops_per_sec));
    extra.insert("allocs_per_op".into(), json!(agg.allocs as f64 / ops));
    extra.insert(
        "alloc_bytes_per_op".into(),
        json!(agg.alloc_bytes as f64 / ops),
    );
    // CPU per pair: robust to other load on the machine, unlike ops/s.
    if let Some(ns) = agg.client_cpu_ns {
        extra.insert("client_cpu_us_per_op".into(), json!(ns as f64 / 1e3 / ops));
    }
    if let Some(ns) = agg.server_cpu_ns {
        extra.insert("server_cpu_us_per_op".into(), json!(ns as f64 / 1e3 / ops));
    }
    // Lock statements the server ran per lock+unlock pair, and ids per statement
    // (rows returned), from pg_stat_statements: how much batching happened.
    if let Some((calls, rows)) = agg.statements {
        extra.insert("server_statements_per_op".into(), json!(calls as f64 / ops));
        extra.insert(
            "ids_per_statement".into(),
            json!(rows as f64 / (calls.max(1)) as f64),
        );
    }
    summarise_rounds(&agg.rounds_extra, &mut extra);
    let latency_of = match name {
        "raw_batched" => {
            extra.insert("batch_size".into(), json!(raw::BATCH));
            "one batch: 1,000 locks in one statement, then 1,000 unlocks in one"
        }
        "contention" | "contention_sqlx" => "one acquire call (the wait for a hot key)",
        "abandoned" | "abandoned_alone" => "one lock + unlock pair of manager B",
        "write_plain" | "write_fenced" | "write_fenced_pipelined" => {
            "one write transaction (BEGIN, [check,] UPDATE, COMMIT)"
        }
        _ => "one lock + unlock pair",
    };
    extra.insert("latency_of".into(), json!(latency_of));
    ScenarioReport {
        ops_per_sec: agg.ops_per_sec(),
        p50_us: agg.pct_us(50.0),
        p99_us: agg.pct_us(99.0),
        connections: agg.connections,
        extra,
    }
}

/// Keeps the per-round figures (`rounds`) and a summary of each over the
/// rounds: the worst round (min for fairness, max for counts of sessions and
/// the like), `true` if any round was.
fn summarise_rounds(rounds: &[Map<String, Value>], extra: &mut Map<String, Value>) {
    if rounds.iter().all(Map::is_empty) {
        return;
    }
    let mut keys: Vec<&String> = rounds.iter().flat_map(|r| r.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let vals: Vec<&Value> = rounds.iter().filter_map(|r| r.get(k)).collect();
        let summary = if vals.iter().all(|v| v.is_boolean()) {
            Some(json!(vals.iter().any(|v| v.as_bool() == Some(true))))
        } else if vals.iter().all(|v| v.is_number()) {
            let nums = vals.iter().filter_map(|v| v.as_f64());
            let worst_is_min = k == "jain" || k == "task_ops_min";
            Some(json!(if worst_is_min {
                nums.fold(f64::INFINITY, f64::min)
            } else {
                nums.fold(f64::NEG_INFINITY, f64::max)
            }))
        } else {
            None
        };
        if let Some(v) = summary {
            extra.entry(k.clone()).or_insert(v);
        }
    }
    extra.insert("rounds".into(), json!(rounds));
}

/// (min, median, max) of ascending `r`.
pub fn spread(r: &[f64]) -> (f64, f64, f64) {
    (
        r.first().copied().unwrap_or(0.0),
        r.get(r.len() / 2).copied().unwrap_or(0.0),
        r.last().copied().unwrap_or(0.0),
    )
}

pub fn print_table(order: &[&str], s: &BTreeMap<String, ScenarioReport>) {
    println!();
    println!(
        "{:<21} {:>10} {:>7} {:>7} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7}",
        "scenario",
        "ops/s",
        "p50 us",
        "p99 us",
        "conns",
        "cli us/op",
        "srv us/op",
        "alloc/op",
        "stmt/op",
        "ids/stmt"
    );
    println!("{}", "-".repeat(100));
    for name in order {
        let Some(r) = s.get(*name) else { continue };
        let f = |k: &str, prec: usize| {
            r.extra
                .get(k)
                .and_then(Value::as_f64)
                .map(|v| format!("{v:.prec$}"))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<21} {:>10.0} {:>7.0} {:>7.0} {:>5} {:>8} {:>8} {:>7} {:>7} {:>7}",
            name,
            r.ops_per_sec,
            r.p50_us,
            r.p99_us,
            r.connections,
            f("client_cpu_us_per_op", 2),
            f("server_cpu_us_per_op", 2),
            f("allocs_per_op", 1),
            f("server_statements_per_op", 3),
            f("ids_per_statement", 1),
        );
    }
    let get = |name: &str, k: &str| -> String {
        s.get(name)
            .and_then(|r| r.extra.get(k))
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into())
    };
    for name in ["contention", "contention_sqlx"] {
        if s.contains_key(name) {
            println!(
                "{name}: sessions per process max {}; fairness over {} tasks: \
                 min {} / max {} acquisitions, Jain {} (worst round)",
                get(name, "max_sessions_per_process"),
                crate::contention::PROCESSES * crate::contention::TASKS,
                get(name, "task_ops_min"),
                get(name, "task_ops_max"),
                get(name, "jain"),
            );
        }
    }
    if s.contains_key("abandoned") {
        println!(
            "abandoned: A's max sessions {} (manager) / {} (pg_stat_activity), {} distinct sessions seen in a round; A got the key {} \
             times and dropped {} waits (most in a round); B stuck: {}",
            get("abandoned", "a_max_sessions"),
            get("abandoned", "a_max_sessions_in_db"),
            get("abandoned", "a_distinct_sessions_seen"),
            get("abandoned", "a_acquisitions"),
            get("abandoned", "a_dropped_waits"),
            get("abandoned", "b_stuck"),
        );
    }
    if s.contains_key("held10k") {
        println!(
            "held10k: {} other locks held through the window (filled in {} ms)",
            get("held10k", "held_during_window"),
            get("held10k", "fill_ms"),
        );
    }
    for name in ["fifo", "fifo_one_manager"] {
        if s.contains_key(name) {
            println!("{name}: in_order = {}", get(name, "in_order"));
        }
    }
    if let Some(r) = s.get("capacity") {
        println!(
            "capacity: held {} on {} connection(s); client {} bytes/lock (allocator), {} bytes/lock (RSS); \
             acquire all {} ms",
            get("capacity", "held"),
            r.connections,
            get("capacity", "client_bytes_per_lock"),
            get("capacity", "rss_bytes_per_lock"),
            get("capacity", "acquire_all_ms"),
        );
    }
}
