//! The demo's closing summary: acquisitions per worker, the overlap check
//! on the shared enter/exit record, and the wait-time percentiles.

use crate::cli::DemoArgs;

use super::record::{self, percentile};

fn ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// Prints the summary; `Err` is the exit code of a failed write (74).
pub(super) fn print_summary(
    args: &DemoArgs,
    a: &record::Analysis,
    malformed: usize,
) -> Result<(), i32> {
    let mut out = String::new();
    out.push_str(&format!(
        "\nSummary: {} workers, {} keys, {}s\n",
        args.workers, args.keys, args.seconds
    ));
    let per: Vec<String> = a
        .per_worker
        .iter()
        .map(|(w, n)| format!("w{w} {n}"))
        .collect();
    out.push_str(&format!(
        "  acquisitions:                   {} ({})\n",
        a.acquisitions,
        per.join(", ")
    ));
    out.push_str(&format!(
        "  overlapping critical sections:  {} (checked {} sections in the shared enter/exit record{})\n",
        a.overlaps.len(),
        a.acquisitions,
        if malformed > 0 {
            format!("; {malformed} torn lines skipped")
        } else {
            String::new()
        }
    ));
    for o in a.overlaps.iter().take(5) {
        out.push_str(&format!(
            "    OVERLAP on {}: worker {} entered while worker {} was inside\n",
            o.key, o.entered, o.inside
        ));
    }
    match (
        percentile(&a.handovers, 50.0),
        percentile(&a.handovers, 99.0),
    ) {
        (Some(p50), Some(p99)) => out.push_str(&format!(
            "  hand-over latency:              p50 {}, p99 {} ({} hand-overs from a holder's exit \
             to a waiting worker's entry)\n",
            ms(p50),
            ms(p99),
            a.handovers.len()
        )),
        _ => out.push_str(
            "  hand-over latency:              no hand-over to a waiting worker happened\n",
        ),
    }
    match &a.takeover {
        Some(t) => match t.next {
            Some((w, ns)) => out.push_str(&format!(
                "  crash:                          worker {} was SIGKILLed holding {}; PostgreSQL \
                 released the lock and worker {w} entered {} after the kill\n",
                t.victim,
                t.key,
                ms(ns)
            )),
            None => out.push_str(&format!(
                "  crash:                          worker {} was SIGKILLed holding {}; no one took \
                 the key afterwards\n",
                t.victim, t.key
            )),
        },
        None => out.push_str("  crash:                          no worker was killed\n"),
    }
    crate::print_stdout(&out)
}
