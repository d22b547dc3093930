//! Job control around `lock run`: signals the tool was started with
//! ignored stay ignored (`nohup`), a stopped job is resumed to receive the
//! signal that ends it, and a Ctrl-Z that reaches the tool stops the job.
//! Without a terminal (no shell to hand the stop to) the tool keeps
//! supervising a stopped job and says so once for each stop (under a
//! lease too: it runs on and renews it), and a lock lost meanwhile is said
//! to be lost while the command was stopped; its watchdog spares a job
//! stopped along with the tool, and kills it once it runs on alone. Under
//! an interactive shell: `shell_job_control`.

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
    // job): it still answers for the lock, and says so.
    let said = run.expect_stderr("is stopped").await;
    assert!(
        said.contains("(SIGTSTP)") && said.contains("keeps lock \"ctrl-z\""),
        "{said}"
    );
    let tool = run.pid().as_raw();
    assert_ne!(state(tool), 'T', "the tool stopped itself");
    assert!(
        !is_free(&inspector, "ctrl-z").await,
        "the lock is still held"
    );
    // Resumed, the job goes on; stopped again, the tool says so again.
    killpg(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    until_state(pid, 'S').await;
    killpg(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    let said = run.expect_stderr("the command (pgid").await;
    assert!(said.contains("is stopped (SIGSTOP)"), "{said}");
    // A SIGCHLD that brings no new stop says nothing.
    run.signal(Signal::SIGCHLD);
    killpg(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    run.send_line("go on").await;
    run.expect_line("finished").await;
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    let said = out.stderr.matches("the command (pgid").count();
    assert_eq!(said, 2, "once for each stop: {}", out.stderr);
}

#[tokio::test]
async fn a_lock_lost_while_the_job_is_stopped_is_said_to_be_lost_while_it_was_stopped() {
    let db = database().await;
    let inspector = db.connect().await.unwrap();
    let (mut run, pid) = started(&db, &["--holder-id", "lost-stopped", "lost-stopped"]).await;
    killpg(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    run.expect_stderr("is stopped (SIGSTOP)").await;
    terminate_holder(&db, "lost-stopped").await;
    let out = run.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
    assert!(
        out.stderr
            .contains("lock \"lost-stopped\" was lost while the command was stopped")
            && out
                .stderr
                .contains("the command died of signal 15 (SIGTERM)")
            && !out.stderr.contains("while the command ran"),
        "{}",
        out.stderr
    );
    assert!(is_free(&inspector, "lost-stopped").await);
}

#[tokio::test]
async fn under_a_lease_the_line_on_a_stopped_job_says_the_tool_renews_it() {
    let db = database().await;
    let (mut run, pid) = started(&db, &["--lease", "1s", "leased-stop"]).await;
    killpg(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    let said = run.expect_stderr("is stopped (SIGSTOP)").await;
    assert!(
        said.contains("keeps lock \"leased-stop\" while it is stopped, as long as this process runs and renews its lease")
            && said.contains("could lose the lock within 1s"),
        "{said}"
    );
    killpg(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    run.send_line("go on").await;
    run.expect_line("finished").await;
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
}

/// `lock run --watchdog 100ms KEY -- sh -c REPORT_AND_WAIT`, its watchdog
/// saying (at debug level) when it spares a stopped job; the job's pid,
/// once it is stopped by SIGSTOP and the tool has said so, and the tool
/// stopped too.
async fn stopped_with_the_tool(
    db: &pgcoord_testkit::pg::TestDatabase,
    key: &str,
) -> (Running, i32) {
    let mut run = Running::start(
        eventsource(Some(db))
            .env("EVENTSOURCE_LOG", "eventsource::watchdog=debug")
            .args(["lock", "run", "--watchdog", "100ms", key])
            .args(["--", "sh", "-c", REPORT_AND_WAIT]),
    );
    let pid: i32 = run.next_line().await.parse().unwrap();
    let _mask = run.next_line().await;
    killpg(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    run.expect_stderr("is stopped (SIGSTOP)").await;
    run.signal(Signal::SIGSTOP);
    until_state(run.pid().as_raw(), 'T').await;
    // The bound passes with both stopped: the watchdog spares the job.
    run.expect_stderr("is stopped too: it is spared").await;
    (run, pid)
}

#[tokio::test]
async fn the_watchdog_spares_a_job_stopped_along_with_the_tool() {
    let db = database().await;
    let (mut run, pid) = stopped_with_the_tool(&db, "spared").await;
    assert_eq!(state(pid), 'T');
    run.signal(Signal::SIGCONT);
    killpg(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    run.send_line("go on").await;
    run.expect_line("finished").await;
    let out = run.finish().await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stderr.contains("SIGKILL"), "{}", out.stderr);
}

#[tokio::test]
async fn the_watchdog_kills_a_job_continued_while_the_tool_stays_stopped() {
    let db = database().await;
    let (mut run, pid) = stopped_with_the_tool(&db, "continued-alone").await;
    killpg(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    let killed = run.expect_stderr("sent SIGKILL").await;
    assert!(killed.contains("last seen stopped"), "{killed}");
    until("the job killed", || has_ended(pid)).await;
    run.signal(Signal::SIGCONT);
    let out = run.finish().await;
    assert_eq!(out.code, 76, "{out:?}");
}
