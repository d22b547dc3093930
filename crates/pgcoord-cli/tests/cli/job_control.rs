//! Job control around `lock run`: signals the tool was started with
//! ignored stay ignored (`nohup`), a stopped job is resumed to receive the
//! signal that ends it, and a Ctrl-Z that reaches the tool stops the job.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::common::*;

/// The job's shell prints its pid and its ignored-signal mask (hex, from
/// `/proc`), then waits for a line on stdin.
const REPORT_AND_WAIT: &str =
    "echo $$; sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status; read x; echo finished";

/// Whether the mask (as `/proc/PID/status` shows it) has `sig` ignored.
fn ignores(mask: &str, sig: Signal) -> bool {
    let bits = u64::from_str_radix(mask.trim(), 16).expect("a hex mask");
    bits & (1 << (sig as u32 - 1)) != 0
}

/// The state letter of `/proc/PID/stat` (`T`: stopped).
fn state(pid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process exists");
    let after_name = &stat[stat.rfind(')').expect("a stat line") + 2..];
    after_name.chars().next().expect("a state")
}

/// `lock run OPTIONS... KEY -- sh -c REPORT_AND_WAIT` started, and the
/// job's pid once it has reported (its mask line read).
async fn started(db: &pgcoord_testkit::pg::TestDatabase, args: &[&str]) -> (Running, i32) {
    let mut run = Running::start(
        eventsource(Some(db))
            .args(["lock", "run"])
            .args(args)
            .args(["--", "sh", "-c", REPORT_AND_WAIT]),
    );
    let pid: i32 = run.next_line().await.parse().unwrap();
    let _mask = run.next_line().await;
    (run, pid)
}

async fn until_state(pid: i32, want: char) {
    until(&format!("process {pid} in state {want}"), || {
        state(pid) == want
    })
    .await;
}

#[tokio::test]
async fn under_nohup_a_hangup_neither_ends_the_tool_nor_reaches_the_job() {
    let db = database().await;
    let mut run = Running::start(eventsource_under(&["nohup"], Some(&db)).args([
        "lock",
        "run",
        "nohup-job",
        "--",
        "sh",
        "-c",
        REPORT_AND_WAIT,
    ]));
    let _pid = run.next_line().await;
    let mask = run.next_line().await;
    // The job inherits the ignore, as it would from nohup directly: the
    // tool did not catch SIGHUP (exec resets a caught signal to its default).
    assert!(ignores(&mask, Signal::SIGHUP), "SigIgn {mask}");
    run.signal(Signal::SIGHUP);
    run.send_line("go on").await;
    run.expect_line("finished").await;
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
}

#[tokio::test]
async fn sigterm_to_the_tool_ends_a_stopped_job() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let (run, pid) = started(&db, &["stopped-job"]).await;
    // Stopped as a typed Ctrl-Z stops it when the job has the terminal.
    killpg(Pid::from_raw(pid), Signal::SIGTSTP).unwrap();
    until_state(pid, 'T').await;
    run.signal(Signal::SIGTERM);
    let out = run.finish().await;
    assert_eq!(out.code, 128 + Signal::SIGTERM as i32, "{out:?}");
    assert!(is_free(&inspector, "stopped-job").await);
}

#[tokio::test]
async fn sigtstp_to_the_tool_stops_the_job_and_the_tool_keeps_the_lock() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let (mut run, pid) = started(&db, &["--watchdog", "200ms", "ctrl-z"]).await;
    // What a Ctrl-Z does when the tool's stdin is not the terminal: the
    // tool, in the terminal's foreground group, gets SIGTSTP.
    run.signal(Signal::SIGTSTP);
    until_state(pid, 'T').await;
    // The tool runs on (it used to stop, and its watchdog then killed the
    // job): it still answers for the lock.
    let tool = run.pid().as_raw();
    assert_ne!(state(tool), 'T', "the tool stopped itself");
    assert!(
        !is_free(&inspector, "ctrl-z").await,
        "the lock is still held"
    );
    // Resumed, the job goes on and ends normally.
    killpg(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    run.send_line("go on").await;
    run.expect_line("finished").await;
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
}
