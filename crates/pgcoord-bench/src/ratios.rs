//! The ratios of ops/s between the scenarios compared (`scenarios::RATIOS`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ctx::ScenarioReport;
use crate::scenarios::RATIOS;

type Ratios = (BTreeMap<String, f64>, BTreeMap<String, Vec<f64>>);

/// The ratios of ops/s over the whole run, and per round (paired: both ran
/// back to back in the same round, so their spread shows how much load
/// elsewhere on the machine moved them), ascending.
pub fn ratios(scenarios: &BTreeMap<String, ScenarioReport>) -> Ratios {
    let ops = |n: &str| scenarios.get(n).map(|r| r.ops_per_sec).filter(|v| *v > 0.0);
    let rounds_of = |n: &str| -> Vec<f64> {
        scenarios
            .get(n)
            .and_then(|r| r.extra.get("rounds_ops_per_sec"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mut ratios = BTreeMap::new();
    let mut round_ratios: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (num, den) in RATIOS {
        // A numerator that did nothing (e.g. a starved `abandoned`) is a ratio of 0.
        let (Some(a), Some(b)) = (ops(num).or(scenarios.get(num).map(|_| 0.0)), ops(den)) else {
            continue;
        };
        ratios.insert(format!("{num}/{den}"), a / b);
        let mut per_round: Vec<f64> = rounds_of(num)
            .iter()
            .zip(rounds_of(den))
            .filter(|(_, b)| *b > 0.0)
            .map(|(a, b)| a / b)
            .collect();
        per_round.sort_by(f64::total_cmp);
        round_ratios.insert(format!("{num}/{den}"), per_round);
    }
    (ratios, round_ratios)
}
