//! `lock top` started with SIGHUP ignored (as `nohup` or a shell's
//! `trap '' HUP` leaves it) keeps it ignored: a SIGHUP does not end the
//! view, which goes on refreshing; `q` still quits.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::common::*;
use crate::tmux::{tmux_or_skip, Tmux};

#[tokio::test]
async fn a_hangup_top_was_started_with_ignored_leaves_it_running() {
    if !tmux_or_skip("`lock top`") {
        return;
    }
    let db = database().await;
    let dir = scratch_dir();
    let pid_file = dir.join("top.pid");
    let tmux = Tmux::start(
        &db,
        &format!(
            "sh -c 'trap \"\" HUP; echo $$ > {}; exec {BIN} lock top --interval 2s'; \
             echo \"top exited $?\"; sleep 600",
            pid_file.display()
        ),
    )
    .await;
    let pid = read_pid(&pid_file).await;
    tmux.until("the view", |s| s.contains("no advisory locks are held"))
        .await;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
        .unwrap();
    assert!(
        ignored & (1 << (Signal::SIGHUP as u32 - 1)) != 0,
        "SIGHUP still ignored"
    );
    kill(Pid::from_raw(pid), Signal::SIGHUP).unwrap();
    let holder = session(&db, "after-hangup").await;
    holder
        .execute("SELECT pg_advisory_lock(71)", &[])
        .await
        .unwrap();
    let screen = tmux
        .until("a refresh after the hangup", |s| {
            s.contains("after-hangup") || s.contains("top exited")
        })
        .await;
    assert!(!screen.contains("top exited"), "{screen}");
    tmux.press("q").await;
    let screen = tmux.until("top's exit", |s| s.contains("top exited")).await;
    assert!(screen.contains("top exited 0"), "{screen}");
}
