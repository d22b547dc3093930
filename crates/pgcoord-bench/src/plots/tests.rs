//! Unit tests of the plots: each draws, with its text, without system fonts.
use super::*;

fn point(x: usize, ops: f64) -> crate::sweep::Point {
    crate::sweep::Point {
        x,
        scenario: format!("s{x}"),
        ops_per_sec: ops,
        rounds_ops_per_sec: vec![ops * 0.9, ops, ops * 1.1],
        p50_us: 1.0,
        p99_us: 2.0,
    }
}

/// Every plot is drawn with the SVG backend alone (no font lookup: a
/// missing system font would fail the draw) and carries its text.
#[test]
fn plots_render_their_text_without_system_fonts() {
    let dir = std::env::temp_dir().join(format!("bench-plots-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let series = vec![Series {
        label: "ours-label",
        points: vec![
            point(1, 8_000.0),
            point(64, 120_000.0),
            point(1024, 250_000.0),
        ],
    }];
    let held = vec![Series {
        label: "held",
        points: vec![point(0, 120_000.0), point(10_000, 30_000.0)],
    }];
    let svg = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    throughput_vs_tasks(&dir.join("t.svg"), &series, 3).unwrap();
    assert!(svg("t.svg").contains("ours-label"));
    assert!(svg("t.svg").contains("<text"));
    throughput_vs_held(&dir.join("h.svg"), &held, 3).unwrap();
    assert!(svg("h.svg").contains("10,000"));
    handoff_latency(&dir.join("l.svg"), &[90.0, 100.0, 110.0, 400.0]).unwrap();
    assert!(svg("l.svg").contains("p99 400"));
    let groups = [RatioGroup {
        label: "fenced-label".into(),
        per_round: vec![0.7, 0.9, 0.8],
        goal: 0.8,
    }];
    ratios(&dir.join("r.svg"), "title", &groups).unwrap();
    assert!(svg("r.svg").contains("median 0.80"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn thousands_groups_digits() {
    assert_eq!(thousands(0.0), "0");
    assert_eq!(thousands(999.4), "999");
    assert_eq!(thousands(1000.0), "1,000");
    assert_eq!(thousands(1_234_567.0), "1,234,567");
    assert_eq!(thousands(-4200.0), "-4,200");
}

#[test]
fn a_binary_outside_a_target_dir_plots_into_the_current_directory() {
    let dir = std::env::temp_dir().join(format!("bench-plots-dir-{}", std::process::id()));
    let bin = dir.join("release");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("pgcoord-bench");
    assert_eq!(default_dir_for(Some(&exe)), PathBuf::from("bench-plots"));
    assert_eq!(default_dir_for(None), PathBuf::from("bench-plots"));
    // Inside cargo's target directory (it holds CACHEDIR.TAG): beside it.
    std::fs::write(
        dir.join("CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .unwrap();
    assert_eq!(default_dir_for(Some(&exe)), dir.join("bench-plots"));
    std::fs::remove_dir_all(&dir).unwrap();
}
