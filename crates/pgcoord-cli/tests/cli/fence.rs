//! `lock install`, `lock run --fence` (the token in the command's
//! environment) and `lock run --lease` (a frozen tool's lock goes to a
//! waiter, and the tool reports the loss when it resumes).

use std::time::Instant;

use nix::sys::signal::Signal;

use tokio::process::Command;

use crate::common::*;

fn run_printing_fence(db: &pgcoord_testkit::pg::TestDatabase, key: &str) -> Command {
    let mut cmd = eventsource(Some(db));
    cmd.args(["lock", "run", "--fence", key, "--", "sh", "-c"])
        .arg("echo \"fence=$EVENTSOURCE_LOCK_FENCE\"");
    cmd
}

#[tokio::test]
async fn fence_before_install_names_the_install_step_and_runs_nothing() {
    let db = database().await;
    let out = output(&mut run_printing_fence(&db, "not-installed")).await;
    assert_eq!(out.code, 78, "{out:?}");
    assert!(
        out.stderr.contains("eventsource lock install"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("not run"), "{}", out.stderr);
    assert_eq!(out.stdout, "", "the command must not run");
}

#[tokio::test]
async fn install_is_idempotent_and_each_fenced_run_gets_a_larger_token() {
    let db = database().await;
    for _ in 0..2 {
        let out = output(eventsource(Some(&db)).args(["lock", "install"])).await;
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stdout.contains("eventsource_lock_fences"),
            "{}",
            out.stdout
        );
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let out = output(&mut run_printing_fence(&db, "fenced-job")).await;
        assert_eq!(out.code, 0, "{out:?}");
        let token: u64 = out
            .stdout
            .trim()
            .strip_prefix("fence=")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no token in {:?}", out.stdout));
        seen.push(token);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    // Without --fence, no token is exported.
    let out = output(
        eventsource(Some(&db))
            .args(["lock", "run", "fenced-job", "--", "sh", "-c"])
            .arg("echo \"fence=${EVENTSOURCE_LOCK_FENCE-unset}\""),
    )
    .await;
    assert_eq!(out.stdout.trim(), "fence=unset", "{out:?}");
}

#[tokio::test]
async fn a_frozen_leased_holder_loses_the_lock_to_a_waiter_and_says_so_on_resume() {
    let db = database().await;
    let mut holder = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--lease",
        "2s",
        "--holder-id",
        "frozen-leased",
        "leased-key",
        "--",
        "sh",
        "-c",
        "echo ready; exec sleep 600",
    ]));
    holder.expect_line("ready").await;
    holder.signal(Signal::SIGSTOP);
    let frozen_at = Instant::now();
    // Nobody terminates anything: the server's idle_session_timeout, set by
    // lease mode, frees the lock of the frozen tool.
    let waiter = output(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--timeout",
        "60s",
        "leased-key",
        "--",
        "true",
    ]))
    .await;
    assert_eq!(waiter.code, 0, "the waiter must get the lock: {waiter:?}");
    println!(
        "lease 2s: a waiter ran {:?} after the holder was frozen",
        frozen_at.elapsed()
    );
    holder.signal(Signal::SIGCONT);
    let out = holder.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
}
