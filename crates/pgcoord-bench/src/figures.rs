//! Which plots a run draws, from which of its results (see `plots`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::ctx::ScenarioReport;
use crate::plots::{self, RatioGroup};
use crate::sweep::Sweeps;
use crate::Res;

/// A ratio plot: its file, title and groups (ratio name as in the
/// report, label on the plot, goal).
type RatioPlot = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str, f64)],
);

/// The ratio plots: fenced against unfenced, metrics on against
/// off; each drawn when the run has its ratios.
pub const RATIO_PLOTS: [RatioPlot; 2] = [
    (
        "fenced_vs_unfenced.svg",
        "Fenced / unfenced pairs/s per round (dots), median (bar), goal (dashed)",
        &[
            (
                "ours_seq_fenced/ours_seq",
                "sequential acquire+release",
                0.8,
            ),
            ("ours_conc64_fenced/ours_conc64", "64 tasks", 0.7),
            (
                "write_fenced/write_plain",
                "protected write (check+UPDATE)",
                0.8,
            ),
        ],
    ),
    (
        "metrics_overhead.svg",
        "Metrics on / feature off, acquire+release per round (dots), median (bar), goal (dashed)",
        &[
            (
                "metrics_on_seq/metrics_off_seq",
                "sequential, no recorder",
                0.98,
            ),
            (
                "metrics_recorder_seq/metrics_off_seq",
                "sequential, recorder",
                0.9,
            ),
            (
                "metrics_on_conc64/metrics_off_conc64",
                "64 tasks, no recorder",
                0.98,
            ),
            (
                "metrics_recorder_conc64/metrics_off_conc64",
                "64 tasks, recorder",
                0.9,
            ),
        ],
    ),
];

/// Draws every plot the run has data for into `dir` (created if needed);
/// returns the files written.
pub fn write(
    dir: &Path,
    sweeps: Option<&Sweeps>,
    scenarios: &BTreeMap<String, ScenarioReport>,
    round_ratios: &BTreeMap<String, Vec<f64>>,
) -> Res<Vec<String>> {
    let mut written = Vec::new();
    let samples: Vec<f64> = scenarios
        .get("handoff")
        .and_then(|r| r.extra.get("samples_us"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let plots_of_ratios: Vec<(&str, &str, Vec<RatioGroup>)> = RATIO_PLOTS
        .iter()
        .map(|(file, title, wanted)| {
            let groups = wanted
                .iter()
                .filter_map(|(name, label, goal)| {
                    round_ratios.get(*name).map(|r| RatioGroup {
                        label: (*label).to_owned(),
                        per_round: r.clone(),
                        goal: *goal,
                    })
                })
                .collect();
            (*file, *title, groups)
        })
        .filter(|(_, _, g): &(_, _, Vec<RatioGroup>)| !g.is_empty())
        .collect();
    let has_sweep = |s: &[crate::sweep::Series]| s.iter().any(|s| !s.points.is_empty());
    let wanted = sweeps.is_some_and(|s| has_sweep(&s.tasks) || has_sweep(&s.held))
        || !samples.is_empty()
        || !plots_of_ratios.is_empty();
    if !wanted {
        return Ok(written);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the plot directory {}: {e}", dir.display()))?;
    let mut out = |file: &str, draw: &dyn Fn(&Path) -> Res<()>| -> Res<()> {
        let path = dir.join(file);
        draw(&path)?;
        written.push(file.to_owned());
        Ok(())
    };
    if let Some(s) = sweeps {
        if has_sweep(&s.tasks) {
            out("throughput_vs_tasks.svg", &|p| {
                plots::throughput_vs_tasks(p, &s.tasks, s.rounds)
            })?;
        }
        if has_sweep(&s.held) {
            out("throughput_vs_held.svg", &|p| {
                plots::throughput_vs_held(p, &s.held, s.rounds)
            })?;
        }
    }
    if !samples.is_empty() {
        out("handoff_latency.svg", &|p| {
            plots::handoff_latency(p, &samples)
        })?;
    }
    for (file, title, groups) in &plots_of_ratios {
        out(file, &|p| plots::ratios(p, title, groups))?;
    }
    Ok(written)
}
