//! `eventsource demo` without a URL: boots its own PostgreSQL, runs, checks.

use crate::common::*;

#[tokio::test]
async fn demo_runs_on_a_throwaway_server_and_finds_no_overlap() {
    let out = output(eventsource(None).args(["demo", "--workers", "3", "--seconds", "3"])).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("overlapping critical sections:  0 "),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("acquisitions:"), "{}", out.stdout);
    assert!(out.stdout.contains("hand-over latency:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("was SIGKILLed holding") && out.stdout.contains("entered"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("throwaway PostgreSQL"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("stopped and removed"), "{}", out.stderr);
}
