//! COMMAND is a job: its whole process group is stopped on lock loss and
//! when the tool dies, and the lock is held until every process of the
//! group has ended. Fault tests on private clusters, with an enter/exit
//! log checked for overlaps.

use nix::sys::signal::Signal;

use crate::common::*;

/// The log's lines after the first one equal to `marker`.
fn lines_after(log: &str, marker: &str) -> Vec<String> {
    log.lines()
        .skip_while(|l| *l != marker)
        .skip(1)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn lock_loss_stops_the_whole_process_group_before_the_tool_exits() {
    let (_cluster, db) = private_db(&[]).await;
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let worker_pid = scratch.join("worker.pid");
    // The real work runs in a grandchild that ignores SIGTERM: only a
    // SIGKILL to the group stops it.
    let script = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {pid}; while :; do echo A-work >> {log}; sleep 0.01; done' & \
         echo ready; wait",
        pid = worker_pid.display(),
        log = log.display()
    );
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "job-loss",
        "--kill-grace",
        "200ms",
        "job-key",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    a.expect_line("ready").await;
    let worker = read_pid(&worker_pid).await;
    terminate_holder(&db, "job-loss").await;
    let out = a.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(out.stderr.contains("process group"), "{}", out.stderr);
    assert!(has_ended(worker), "the grandchild outlived the tool");

    // The next holder enters; nothing of A's job writes after it.
    let b = output(
        eventsource(Some(&db))
            .args(["lock", "run", "job-key", "--", "sh", "-c"])
            .arg(format!(
                "echo B-in >> {log}; echo B-out >> {log}",
                log = log.display()
            )),
    )
    .await;
    assert_eq!(b.code, 0, "{b:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("A-work"), "{text}");
    assert_eq!(lines_after(&text, "B-in"), vec!["B-out"], "{text}");
}

#[tokio::test]
async fn a_command_that_backgrounds_its_work_holds_the_lock_until_the_work_ends() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let scratch = scratch_dir();
    let log = scratch.join("log");
    let leader_pid = scratch.join("leader.pid");
    // The leader starts its work in the background (reading the tool's
    // stdin through fd 3, since a background list's stdin is /dev/null)
    // and exits at once.
    let script = format!(
        "exec 3<&0; (read x <&3; echo bg-out >> {log}) & echo $$ > {pid}; echo started",
        log = log.display(),
        pid = leader_pid.display()
    );
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "--holder-id",
        "backgrounder",
        "bg-key",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    a.expect_line("started").await;
    let leader = read_pid(&leader_pid).await;
    until("the leader reaped", || has_ended(leader)).await;
    a.expect_stderr("still run in its process group").await;

    // The leader is gone, its work is not: the lock is still held.
    let other =
        output(eventsource(Some(&db)).args(["lock", "run", "--no-wait", "bg-key", "--", "true"]))
            .await;
    assert_eq!(other.code, 75, "{other:?}");
    assert!(other.stderr.contains("backgrounder"), "{}", other.stderr);

    a.send_line("go").await;
    let out = a.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "bg-out\n");
    assert!(is_free(&inspector, "bg-key").await);
}

#[tokio::test]
async fn a_process_that_leaves_the_group_while_the_tool_waits_does_not_hold_the_lock() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    // The leader exits at once; its background child waits for a line,
    // then leaves the job's process group (setsid) and runs on a moment.
    let script = "exec 3<&0; (read x <&3; exec setsid sleep 1) & echo started";
    let mut a = Running::start(eventsource(Some(&db)).args([
        "lock",
        "run",
        "escape-key",
        "--",
        "sh",
        "-c",
        script,
    ]));
    a.expect_line("started").await;
    a.expect_stderr("still run in its process group").await;
    assert!(
        !is_free(&inspector, "escape-key").await,
        "held while the child is in the group"
    );
    // The tool is waiting for the group now; the child leaves it. Linux
    // wakes no blocking wait for the group when such a child ends, and the
    // tool used to hang there, holding the lock, for ever.
    a.send_line("go").await;
    let out = a.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(is_free(&inspector, "escape-key").await);
}

#[tokio::test]
async fn a_sigkilled_tool_takes_the_whole_job_with_it() {
    let (_cluster, db) = private_db(&[]).await;
    let scratch = scratch_dir();
    let worker_pid = scratch.join("worker.pid");
    // The background `sleep` keeps the tool's stdout open: the test's read
    // of stdout ends only when it has died too.
    let script = format!(
        "sleep 1000 & echo $! > {pid}; echo entered; wait",
        pid = worker_pid.display()
    );
    let mut a = Running::start(
        eventsource(Some(&db)).args(["lock", "run", "kill-key", "--", "sh", "-c", &script]),
    );
    a.expect_line("entered").await;
    let worker = read_pid(&worker_pid).await;
    a.signal(Signal::SIGKILL);
    let out = a.finish().await;
    assert_eq!(out.code, 128 + 9);
    assert_eq!(out.stdout, "");
    until("the background worker reaped", || has_ended(worker)).await;
    assert!(out.stderr.contains("watchdog"), "{}", out.stderr);
}
