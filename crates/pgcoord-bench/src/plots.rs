//! The plots of one run, as SVG (plotters' SVG backend: text is written as
//! `<text>` elements and sized by plotters' built-in estimate, so no system
//! font, font file or fontconfig is needed to draw them).
//!
//! - `throughput_vs_tasks.svg`: pairs/s against concurrent tasks (1 to
//!   1,024), ours, sqlx and raw SQL, log-log, bars from the slowest to the
//!   fastest round;
//! - `handoff_latency.svg`: the distribution of hand-over latencies;
//! - `throughput_vs_held.svg`: pairs/s of 64 tasks against the locks the
//!   manager holds meanwhile;
//! - `ratios.svg` (when the run has them): the paired ratios with goals
//!   (fenced against unfenced, metrics on against off), one dot per round.

use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::sweep::Series;
use crate::Res;

const SIZE: (u32, u32) = (820, 500);
const FONT: &str = "sans-serif";
/// Line colours: raw SQL, ours, sqlx (by series position), then more.
const COLOURS: [RGBColor; 4] = [
    RGBColor(90, 90, 90),
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
];

fn err(e: impl std::fmt::Display) -> Box<dyn std::error::Error + Send + Sync> {
    format!("plot: {e}").into()
}

/// Where the plots go when not told: `<cargo target dir>/bench-plots`,
/// found as the ancestor of the running executable that holds cargo's
/// `CACHEDIR.TAG` (so `cargo run` and `cargo bench` agree, whatever the
/// current directory); for a binary outside a cargo target directory
/// (installed, copied), `bench-plots` in the current directory, never a
/// path of the machine it was built on.
pub fn default_dir() -> PathBuf {
    default_dir_for(std::env::current_exe().ok().as_deref())
}

/// [`default_dir`] for the executable `exe`.
fn default_dir_for(exe: Option<&Path>) -> PathBuf {
    exe.and_then(|exe| {
        exe.ancestors()
            .find(|d| d.join("CACHEDIR.TAG").is_file())
            .map(|d| d.join("bench-plots"))
    })
    .unwrap_or_else(|| PathBuf::from("bench-plots"))
}

/// The repository's `docs/plots` (`--docs-plots`): the workspace this
/// binary was built from. Err for a binary whose source tree is not here
/// (built on another machine, or moved).
pub fn docs_dir() -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/plots");
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "--docs-plots writes into the repository's docs/plots, which is not at {} \
             (this binary was built elsewhere): give --plots DIR",
            dir.display()
        ))
    }
}

/// Pairs/s against tasks, one line per implementation, log-log; each point
/// has a bar from its slowest to its fastest round.
pub fn throughput_vs_tasks(path: &Path, series: &[Series], rounds: usize) -> Res<()> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (lo, hi) = all().fold((f64::MAX, 0f64), |(lo, hi), p| {
        let (a, _, b) = p.spread();
        (lo.min(a.max(1.0)), hi.max(b))
    });
    if hi <= 0.0 {
        return Ok(());
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Lock + unlock pairs/s against concurrent tasks ({rounds} round(s) per point)"),
            (FONT, 18),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0.8f64..1300f64).log_scale(),
            ((lo / 1.5)..(hi * 1.5)).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("concurrent tasks (distinct keys)")
        .y_desc("pairs/s (log)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| thousands(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (p.x as f64, p.ops_per_sec))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
            .map_err(err)?
            .label(s.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(
                pts.iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, colour.filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(s.points.iter().map(|p| {
                let (a, m, b) = p.spread();
                ErrorBar::new_vertical(p.x as f64, a, m, b, colour, 8)
            }))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Pairs/s of 64 tasks against the locks held by the same manager; the x
/// axis is one slot per count (0, 100, 1,000, ...).
pub fn throughput_vs_held(path: &Path, series: &[Series], rounds: usize) -> Res<()> {
    let Some(s) = series.first().filter(|s| !s.points.is_empty()) else {
        return Ok(());
    };
    let hi = s.points.iter().map(|p| p.spread().2).fold(0f64, f64::max);
    let n = s.points.len() as i32;
    let labels: Vec<String> = s.points.iter().map(|p| thousands(p.x as f64)).collect();
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Pairs/s of 64 tasks while the manager holds N other locks ({rounds} round(s))"
            ),
            (FONT, 18),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n.max(2) - 1).into_segmented(), 0f64..hi * 1.15)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("other locks held by the manager through the window")
        .y_desc("pairs/s")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| thousands(*v))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    let colour = COLOURS[1];
    let pts: Vec<(SegmentValue<i32>, f64)> = s
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| (SegmentValue::CenterOf(i as i32), p.ops_per_sec))
        .collect();
    chart
        .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
        .map_err(err)?;
    chart
        .draw_series(
            pts.iter()
                .map(|(x, y)| Circle::new((x.clone(), *y), 4, colour.filled())),
        )
        .map_err(err)?;
    chart
        .draw_series(s.points.iter().enumerate().map(|(i, p)| {
            let (a, m, b) = p.spread();
            ErrorBar::new_vertical(SegmentValue::CenterOf(i as i32), a, m, b, colour, 10)
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The distribution of hand-over latencies (µs): the share of hand-overs
/// at or under each latency, log x, with p50 / p99 marked.
pub fn handoff_latency(path: &Path, samples_us: &[f64]) -> Res<()> {
    if samples_us.is_empty() {
        return Ok(());
    }
    let mut v = samples_us.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let (lo, hi) = (v[0].max(1.0), v[v.len() - 1].max(2.0));
    let pct = |p: f64| v[((p / 100.0 * n).ceil() as usize).clamp(1, v.len()) - 1];
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Hand-over latency: release() to the queued waiter's acquire() returning ({} trials)",
                v.len()
            ),
            (FONT, 17),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(((lo / 1.3)..(hi * 1.3)).log_scale(), 0f64..100f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("hand-over latency, µs (log)")
        .y_desc("% of hand-overs at or under")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    let colour = COLOURS[1];
    let cdf: Vec<(f64, f64)> = v
        .iter()
        .enumerate()
        .map(|(i, &x)| (x.max(lo), (i + 1) as f64 / n * 100.0))
        .collect();
    chart
        .draw_series(LineSeries::new(cdf, colour.stroke_width(2)))
        .map_err(err)?;
    for (p, c) in [(50.0, BLACK), (99.0, COLOURS[2])] {
        let x = pct(p).max(lo);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, 0.0), (x, 100.0)],
                5,
                4,
                c.into(),
            ))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" p{p:.0} {x:.0} µs"),
                (x, if p < 60.0 { 12.0 } else { 30.0 }),
                (FONT, 13).into_font().color(&c),
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// One group of the ratio plot: its label, each round's ratio, the goal.
pub struct RatioGroup {
    pub label: String,
    pub per_round: Vec<f64>,
    pub goal: f64,
}

/// Paired ratios, one slot per group: each round's ratio as a dot, the
/// median as a bar, the goal as a dashed line.
pub fn ratios(path: &Path, title: &str, groups: &[RatioGroup]) -> Res<()> {
    let groups: Vec<&RatioGroup> = groups.iter().filter(|g| !g.per_round.is_empty()).collect();
    if groups.is_empty() {
        return Ok(());
    }
    let hi = groups
        .iter()
        .flat_map(|g| g.per_round.iter().copied())
        .fold(1.2f64, f64::max);
    let n = groups.len() as i32;
    let labels: Vec<String> = groups.iter().map(|g| g.label.clone()).collect();
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(50)
        .build_cartesian_2d((0..n.max(2) - 1).into_segmented(), 0f64..hi * 1.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("ratio (1.0 = as fast)")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for (i, g) in groups.iter().enumerate() {
        let i = i as i32;
        let mut r = g.per_round.clone();
        r.sort_by(f64::total_cmp);
        let median = r[r.len() / 2];
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), median),
                ],
                COLOURS[1].mix(0.25).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(
                r.iter()
                    .map(|&y| Circle::new((SegmentValue::CenterOf(i), y), 3, COLOURS[1].filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![
                    (SegmentValue::Exact(i), g.goal),
                    (SegmentValue::Exact(i + 1), g.goal),
                ],
                6,
                4,
                COLOURS[2].stroke_width(2),
            ))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("median {median:.2}, goal >= {:.2}", g.goal),
                (SegmentValue::Exact(i), hi * 1.05),
                (FONT, 12),
            )))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// 12345.6 -> "12,346".
fn thousands(v: f64) -> String {
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests;
