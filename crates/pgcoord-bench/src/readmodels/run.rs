//! The read-model run: each round measures the PostgreSQL and SQLite pairs
//! and the catch-up pairs; at the end it prints the medians, the per-round
//! ratios and the catch-up rates.

use std::time::Duration;

use uuid::Uuid;

use super::catch_up::catch_up_round;
use super::fixture::BATCH;
use super::postgres::postgres_round;
use super::rate::Round;
use super::sqlite::sqlite_round;
use crate::Res;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// Runs the read-model scenarios and prints the table `docs/performance.md`
/// quotes. `batched_events` is the number of events each round's batched
/// catch-up (ours, and again raw) applies.
pub async fn run(
    url: &str,
    rounds: usize,
    secs: Duration,
    quick: bool,
    batched_events: Option<usize>,
) -> Res<()> {
    let dir = std::env::temp_dir().join(format!("pgcoord-bench-rm-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let mut all: Vec<Round> = Vec::new();
    let mut catch_up: Vec<Round> = Vec::new();
    let single = if quick { 500 } else { 2_000 };
    let batched = batched_events.unwrap_or(if quick { 5_000 } else { 20_000 });
    for round in 0..rounds {
        let mut r = postgres_round(url, secs).await?;
        r.extend(sqlite_round(&dir, secs, round).await?);
        eprintln!(
            "  round {}/{rounds}: {}",
            round + 1,
            r.iter()
                .map(|(n, v)| format!("{n} {v:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        all.push(r);
        let c = catch_up_round(url, &dir, round, single, batched).await?;
        eprintln!(
            "  round {}/{rounds} catch-up: {}",
            round + 1,
            c.iter()
                .map(|(n, v)| format!("{n} {v:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        catch_up.push(c);
    }
    let names: Vec<&str> = all[0].iter().map(|(n, _)| *n).collect();
    println!();
    println!("{:<26} {:>12} {:>12}", "scenario", "median op/s", "rows/s");
    for name in &names {
        let mut v: Vec<f64> = all
            .iter()
            .filter_map(|r| r.iter().find(|(n, _)| n == name).map(|x| x.1))
            .collect();
        let m = median(&mut v);
        let rows = if name.contains("many100") {
            m * BATCH as f64
        } else {
            m
        };
        println!("{name:<26} {m:>12.0} {rows:>12.0}");
    }
    println!();
    println!(
        "{:<30} {:>8} {:>8} {:>8}",
        "ratio (per round)", "median", "min", "max"
    );
    let ratio = |num: &str, den: &str, scale: f64| {
        let mut v: Vec<f64> = all
            .iter()
            .chain(&catch_up)
            .filter_map(|r| {
                let a = r.iter().find(|(n, _)| *n == num)?.1;
                let b = r.iter().find(|(n, _)| *n == den)?.1;
                (b > 0.0).then_some(a * scale / b)
            })
            .collect();
        let m = median(&mut v);
        println!(
            "{:<30} {m:>8.2} {:>8.2} {:>8.2}",
            format!("{num}/{den}"),
            v.first().copied().unwrap_or(0.0),
            v.last().copied().unwrap_or(0.0)
        );
    };
    for backend in ["pg", "sqlite"] {
        for op in ["get", "save", "save_many100", "find"] {
            ratio(
                &format!("{backend}_{op}"),
                &format!("{backend}_{op}_raw"),
                1.0,
            );
        }
        // Rows/s of save_many(100) against rows/s of single saves.
        ratio(
            &format!("{backend}_save_many100"),
            &format!("{backend}_save"),
            BATCH as f64,
        );
    }
    for backend in ["pg", "sqlite"] {
        for how in ["catch_up", "catch_up_batched100"] {
            ratio(
                &format!("{backend}_{how}"),
                &format!("{backend}_{how}_raw"),
                1.0,
            );
        }
    }
    println!();
    for (name, _) in catch_up.first().map(Vec::as_slice).unwrap_or_default() {
        let mut v: Vec<f64> = catch_up
            .iter()
            .filter_map(|r| r.iter().find(|(n, _)| n == name).map(|x| x.1))
            .collect();
        let m = median(&mut v);
        let (how, events) = if name.contains("batched") {
            ("100 events per transaction", batched)
        } else {
            ("one transaction per event", single)
        };
        println!(
            "{name:<32} {m:>8.0} events/s ({how}; {} events in {rounds} rounds; min {:.0}, max {:.0})",
            events * rounds,
            v.first().copied().unwrap_or(0.0),
            v.last().copied().unwrap_or(0.0)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
