//! A stopped tool (SIGSTOP) cannot stop COMMAND itself: its watchdog
//! kills COMMAND's process group once the tool stops answering. Fault
//! tests on private clusters, with an enter/exit log checked for overlaps.

use nix::sys::signal::Signal;

use crate::common::*;

/// A job whose work runs in a grandchild that appends `A <ns>` lines
/// (CLOCK_REALTIME, one machine) to `log`; it says `ready` on stdout.
fn worker_script(log: &std::path::Path, worker_pid: &std::path::Path) -> String {
    format!(
        "sh -c 'echo $$ > {pid}; while :; do echo \"A $(date +%s%N)\" >> {log}; sleep 0.01; done' & \
         echo ready; wait",
        pid = worker_pid.display(),
        log = log.display()
    )
}

fn entered_at(log: &str, who: &str) -> Option<i128> {
    log.lines()
        .find_map(|l| l.strip_prefix(who)?.trim().parse().ok())
}

fn last_a(log: &str) -> i128 {
    log.lines()
        .filter_map(|l| l.strip_prefix("A ")?.trim().parse().ok())
        .max()
        .expect("A worked")
}

#[tokio::test]
async fn a_stopped_tool_has_its_job_killed_by_the_watchdog() {
    let (_cluster, db) = private_db(&[]).await;
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let worker_pid = scratch.join("worker.pid");
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "frozen",
        "--watchdog",
        "500ms",
        "frozen-key",
        "--",
        "sh",
        "-c",
        &worker_script(&log, &worker_pid),
    ]));
    a.expect_line("ready").await;
    let worker = read_pid(&worker_pid).await;
    a.signal(Signal::SIGSTOP);
    // With the tool stopped, only the watchdog can end the job.
    until("the worker killed", || has_ended(worker)).await;
    // Now the stopped tool's session ends (as a server-side
    // idle_session_timeout or an operator would end it) and B enters.
    terminate_holder(&db, "frozen").await;
    let b = output(
        eventsource(Some(&db))
            .args(["lock", "run", "frozen-key", "--", "sh", "-c"])
            .arg(format!(
                "echo \"B $(date +%s%N)\" >> {log}",
                log = log.display()
            )),
    )
    .await;
    assert_eq!(b.code, 0, "{b:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines().last().map(|l| l.starts_with("B ")),
        Some(true),
        "{text}"
    );

    a.signal(Signal::SIGCONT);
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("watchdog"), "{}", out.stderr);
    // The job is dead: no warning that nothing would stop it.
    assert!(!out.stderr.contains("nothing stops"), "{}", out.stderr);
}

/// The children of `pid` (from /proc).
fn children(pid: i32) -> Vec<i32> {
    // Each thread lists the children it forked: the tool spawns from
    // whichever runtime thread runs the task, not only the main one.
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[tokio::test]
async fn a_command_that_exited_0_while_the_tool_was_stopped_gets_an_explained_76() {
    let db = database().await;
    let scratch = scratch_dir();
    let go = scratch.join("go");
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--watchdog",
        "200ms",
        "exited-while-stopped",
        "--",
        "sh",
        "-c",
        &format!(
            "echo \"ready $$\"; while [ ! -e {go} ]; do sleep 0.01; done; exit 0",
            go = go.display()
        ),
    ]));
    let line = a.next_line().await;
    let command: i32 = line.strip_prefix("ready ").unwrap().parse().unwrap();
    let tool = a.pid().as_raw();
    let watchdog = children(tool)
        .into_iter()
        .find(|c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|l| l.split(|b| *b == 0).any(|arg| arg == b"watchdog"))
        })
        .expect("the watchdog process");
    a.signal(Signal::SIGSTOP);
    std::fs::write(&go, "").unwrap();
    until("the command exited", || has_ended(command)).await;
    until("the watchdog fired", || has_ended(watchdog)).await;
    a.signal(Signal::SIGCONT);
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(
        out.stderr.contains("exited with code 0")
            && out.stderr.contains("may have overlapped another holder")
            && out.stderr.contains("exiting with 76"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("nothing stops"), "{}", out.stderr);
}

/// The realistic case, measured: the server's `idle_session_timeout`
/// (3 s here) ends the stopped tool's session and a queued `lock run` takes
/// the lock; the watchdog (1 s) must have killed the job before. Prints
/// the margin; fails on any overlap.
#[tokio::test]
async fn a_stopped_tool_under_a_server_lease_leaves_no_overlap() {
    let (_cluster, db) = private_db(&[("idle_session_timeout", "3s")]).await;
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let worker_pid = scratch.join("worker.pid");
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "leased",
        "--watchdog",
        "1s",
        "lease-key",
        "--",
        "sh",
        "-c",
        &worker_script(&log, &worker_pid),
    ]));
    a.expect_line("ready").await;
    let b = Running::start(
        eventsource(Some(&db))
            .args(["lock", "run", "lease-key", "--", "sh", "-c"])
            .arg(format!(
                "echo \"B $(date +%s%N)\" >> {log}",
                log = log.display()
            )),
    );
    {
        let inspector = db.connect().await.unwrap();
        wait_for(&inspector, "lease-key", "B waiting", |l| {
            l.is_some_and(|l| l.waiters.len() == 1)
        })
        .await;
    }
    a.signal(Signal::SIGSTOP);
    let b_out = b.finish().await;
    assert_eq!(b_out.code, 0, "{b_out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let b_in = entered_at(&text, "B ").expect("B entered");
    let a_last = last_a(&text);
    eprintln!(
        "watchdog 1s, idle_session_timeout 3s: A's last write {:.3} s before B entered",
        (b_in - a_last) as f64 / 1e9
    );
    assert!(a_last < b_in, "A's job wrote after B entered: {text}");
    a.signal(Signal::SIGCONT);
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
}

/// The worst case, measured: no lease, an operator terminates the stopped
/// tool's session at once and the next holder enters; A's job goes on only
/// until the watchdog (500 ms) fires. Prints the overlap; asserts that the
/// job ended while the tool was still stopped.
#[tokio::test]
async fn without_a_lease_the_overlap_is_what_the_watchdog_leaves_measured() {
    let (_cluster, db) = private_db(&[]).await;
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let worker_pid = scratch.join("worker.pid");
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "cut",
        "--watchdog",
        "500ms",
        "cut-key",
        "--",
        "sh",
        "-c",
        &worker_script(&log, &worker_pid),
    ]));
    a.expect_line("ready").await;
    let worker = read_pid(&worker_pid).await;
    a.signal(Signal::SIGSTOP);
    terminate_holder(&db, "cut").await;
    let b = output(
        eventsource(Some(&db))
            .args(["lock", "run", "cut-key", "--", "sh", "-c"])
            .arg(format!(
                "echo \"B $(date +%s%N)\" >> {log}",
                log = log.display()
            )),
    )
    .await;
    assert_eq!(b.code, 0, "{b:?}");
    until("the worker killed while the tool is stopped", || {
        has_ended(worker)
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    let b_in = entered_at(&text, "B ").expect("B entered");
    eprintln!(
        "watchdog 500ms, session terminated at once: A's job wrote for {:.3} s after B entered",
        ((last_a(&text) - b_in).max(0)) as f64 / 1e9
    );
    a.signal(Signal::SIGCONT);
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("watchdog"), "{}", out.stderr);
}
