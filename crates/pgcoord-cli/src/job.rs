//! COMMAND as a job: its own process group, stopped as a whole.
//!
//! COMMAND starts in a new process group (pgid = its pid), which every
//! process it starts joins unless it moves itself out (`setsid`,
//! `setpgid`). Signals the tool forwards, the lock-loss SIGTERM/SIGKILL and
//! the watchdog's SIGKILL go to the whole group. The tool is a child
//! subreaper, so what COMMAND leaves behind when it exits is re-parented to
//! the tool, which waits for the whole group to end before it releases the
//! lock.
//!
//! When the tool has a controlling terminal among its standard streams and
//! is in its foreground, the terminal is handed to COMMAND's group (as a shell does),
//! so that Ctrl-C, Ctrl-\\ and terminal input reach COMMAND directly; the
//! tool takes it back when the job stops under a job-control shell (and
//! hands it over again when `fg` continues the tool), and at the end. See
//! `job_control`. A Ctrl-C that ends COMMAND so is then passed on to the
//! tool's own group (see `signals`).
//!
//! Not when the tool is one stage of a pipeline (`eventsource lock run k
//! -- cmd | less`): its process group has other live members than the
//! tool and its ancestors ([`crate::proc_stat::group_has_others`]). The
//! pipeline keeps the terminal, as it would without the tool, so that a
//! pager or a password prompt beside it reads the terminal (were the
//! terminal the job's, it would stop them, and the tool with them, by
//! SIGTTIN), and a Ctrl-C reaches every stage, the tool included, which
//! forwards it to the job. The price: a job that itself reads the terminal
//! in a pipeline is stopped by the terminal (SIGTTIN), as a background job
//! would be, and the tool with it (`job_control`). The check is made
//! whenever the terminal would be handed over, so a stage that ended by
//! then (`echo x | eventsource lock run k -- sudo ...`) does not count.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use nix::errno::Errno;
use nix::sys::signal::{killpg, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getpid, setpgid, tcgetpgrp, tcsetpgrp, Pid};
use tokio::process::{Child, Command};

/// A started job: COMMAND's process and its process group.
#[derive(Debug)]
pub struct Job {
    /// COMMAND itself (the group's leader).
    pub child: Child,
    /// COMMAND's pid, which is also its process group id.
    pub pgid: Pid,
    /// Whether the terminal was handed to the job and must be taken back.
    has_terminal: bool,
}

/// Makes this process a child subreaper: orphans of COMMAND's processes are
/// re-parented to it rather than to init, so it can wait for them.
pub fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(error = %e, "cannot become a child subreaper");
    }
}

/// The first standard stream (stdin, stdout, stderr) that is this
/// process's controlling terminal (`tcgetpgrp` fails on any other file):
/// the one the terminal is handed over and taken back through, whether or
/// not stdin is a pipe (`echo x | eventsource lock run k -- sudo ...`).
fn terminal() -> Option<BorrowedFd<'static>> {
    // SAFETY: the standard streams stay open for the life of the process.
    #[allow(unsafe_code)]
    [0, 1, 2]
        .into_iter()
        .map(|fd| unsafe { BorrowedFd::borrow_raw(fd) })
        .find(|fd| tcgetpgrp(fd).is_ok())
}

/// The controlling terminal, when this process's group is its foreground.
fn owned_terminal() -> Option<BorrowedFd<'static>> {
    terminal().filter(|fd| tcgetpgrp(fd).is_ok_and(|fg| fg == getpgrp()))
}

/// Whether this process runs as a foreground job of its terminal: its
/// controlling terminal is one of its standard streams and its process
/// group is the terminal's foreground group (a shell ran it in the
/// foreground).
pub fn in_terminal_foreground() -> bool {
    owned_terminal().is_some()
}

/// Writes `p <pid>\n` to `fd` without allocating (runs between fork and exec).
fn announce_pid(fd: RawFd, pid: i32) -> io::Result<()> {
    let mut buf = [0u8; 24];
    buf[0] = b'p';
    buf[1] = b' ';
    let mut digits = [0u8; 12];
    let mut n = pid.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[2 + i] = digits[len - 1 - i];
    }
    buf[2 + len] = b'\n';
    // SAFETY (of the borrow): the caller keeps `fd` open across the spawn.
    #[allow(unsafe_code)]
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let written = nix::unistd::write(fd, &buf[..3 + len])?;
    if written != 3 + len {
        return Err(io::Error::from(Errno::EIO));
    }
    Ok(())
}

/// Takes the terminal for the calling process's group with SIGTTOU blocked
/// (a background group may not otherwise), then restores the signal mask.
fn take_terminal(fd: BorrowedFd<'_>, pgid: Pid) -> nix::Result<()> {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old))?;
    let result = tcsetpgrp(fd, pgid);
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
    result
}

/// Starts COMMAND in a process group of its own, with the lock's key and id
/// and `env` (e.g. the fencing token) in its environment. `watchdog_fd` is the write end of the watchdog's pipe:
/// the child announces its pid there before it executes COMMAND, so the
/// watchdog knows the group before any of its processes runs COMMAND's code.
pub fn spawn(
    command: &[OsString],
    key: &str,
    lock_id: i64,
    env: &[(&str, String)],
    watchdog_fd: Option<RawFd>,
) -> io::Result<Job> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("EVENTSOURCE_LOCK_KEY", key)
        .env("EVENTSOURCE_LOCK_ID", lock_id.to_string())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(false);
    let tty = owned_terminal()
        .filter(|_| !crate::proc_stat::group_has_others())
        .map(|fd| fd.as_raw_fd());
    let has_terminal = tty.is_some();
    let parent = getpid();
    // SAFETY: the hook runs in the forked child before exec. It makes only
    // async-signal-safe system calls (setpgid, prctl, getppid, getpid,
    // write, sigprocmask, tcsetpgrp), takes no lock and allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
            // The lock lives in the tool's database session: if the tool
            // dies, so must COMMAND (the watchdog stops the rest of the group).
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // The parent may have died before the call took effect.
            if nix::unistd::getppid() != parent {
                return Err(io::Error::from(Errno::ESRCH));
            }
            if let Some(fd) = watchdog_fd {
                announce_pid(fd, getpid().as_raw())?;
            }
            if let Some(fd) = tty {
                let _ = take_terminal(BorrowedFd::borrow_raw(fd), getpid());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    // Never 0: killpg(0, ...) would signal the tool's own group.
    let pgid = match child.id() {
        Some(id) if id > 0 => Pid::from_raw(id as i32),
        _ => {
            return Err(io::Error::other(
                "the command exited before it could be supervised",
            ))
        }
    };
    // As shells do, from both sides: whichever runs first wins, the other
    // fails harmlessly.
    let _ = setpgid(pgid, pgid);
    if has_terminal {
        if let Some(fd) = terminal() {
            let _ = take_terminal(fd, pgid);
        }
    }
    Ok(Job {
        child,
        pgid,
        has_terminal,
    })
}

impl Job {
    /// Sends `sig` to every process of the job's group.
    pub fn signal(&self, sig: Signal) {
        match killpg(self.pgid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = %self.pgid, error = %e, "cannot signal the command's process group")
            }
        }
    }

    /// Whether any process of the group still runs: reaps the group's
    /// members that already ended and were re-parented here (zombies count
    /// as members until reaped). Call only after COMMAND itself was reaped.
    pub fn group_alive(&self) -> bool {
        reap_members(self.pgid);
        group_alive(self.pgid)
    }

    /// Gives the terminal back to the tool's own process group, if it was
    /// handed to the job.
    pub fn restore_terminal(&mut self) {
        if std::mem::take(&mut self.has_terminal) {
            let Some(fd) = terminal() else { return };
            if let Err(e) = take_terminal(fd, getpgrp()) {
                tracing::debug!(error = %e, "cannot take the terminal back");
            }
        }
    }

    /// Whether the tool's own group is its terminal's foreground group.
    pub fn terminal_in_foreground(&self) -> bool {
        owned_terminal().is_some()
    }

    /// Whether the job holds the terminal the tool handed it.
    pub fn holds_terminal(&self) -> bool {
        self.has_terminal
    }

    /// After the tool was continued (`fg` or `bg` of its shell), or put in
    /// the foreground without a signal (`fg` of a job that runs): when the
    /// tool is in its terminal's foreground, hands the terminal to the job,
    /// as at the start (unless the tool is a stage of a pipeline: the
    /// pipeline keeps it); when it is in the background, the shell has the
    /// terminal, and the job must do without it. Returns whether the job
    /// has the terminal now.
    pub fn terminal_after_continue(&mut self) -> bool {
        let Some(fd) = terminal() else {
            self.has_terminal = false;
            return false;
        };
        match tcgetpgrp(fd) {
            Ok(fg) if fg == getpgrp() => {
                self.has_terminal = false;
                if crate::proc_stat::group_has_others() {
                    tracing::debug!("a stage of a pipeline: the pipeline keeps the terminal");
                    return false;
                }
                match take_terminal(fd, self.pgid) {
                    Ok(()) => self.has_terminal = true,
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot hand the terminal to the command")
                    }
                }
            }
            Ok(fg) if fg == self.pgid => {}
            _ => self.has_terminal = false,
        }
        self.has_terminal
    }

    /// The stops and continues that the job's processes that are this
    /// process's children (COMMAND, orphans re-parented here) reported
    /// since the last look. Only these reports are taken (`waitid` with
    /// WSTOPPED and WCONTINUED, never WEXITED), so exit statuses stay for
    /// COMMAND's `Child` and for [`Job::group_alive`].
    pub fn take_reports(&self) -> Reports {
        let mut reports = Reports::default();
        loop {
            let flags = WaitPidFlag::WSTOPPED | WaitPidFlag::WCONTINUED | WaitPidFlag::WNOHANG;
            match waitid(Id::PGid(self.pgid), flags) {
                Ok(WaitStatus::Stopped(pid, sig)) => {
                    // A report can be older than a SIGCONT since.
                    let stat = crate::proc_stat::Stat::of(pid.as_raw());
                    if stat.is_some_and(|s| s.is_stopped()) {
                        reports.stop = Some(sig);
                        reports.stopped.push(pid);
                    }
                }
                Ok(WaitStatus::Continued(_)) => reports.continued = true,
                Err(Errno::EINTR) => {}
                // None left (StillAlive), or no child in the group (ECHILD).
                _ => return reports,
            }
        }
    }
}

/// What [`Job::take_reports`] found. A process reports each stop once, so
/// a stop report from a process whose stop was reported before means it
/// was continued and stopped again (its continue report is lost when the
/// second stop comes first).
#[derive(Debug, Default)]
pub struct Reports {
    /// The signal that stopped the job, when a process that reported a
    /// stop is still stopped.
    pub stop: Option<Signal>,
    /// The processes that reported a stop and are still stopped.
    pub stopped: Vec<Pid>,
    /// Whether a process reported that it was continued.
    pub continued: bool,
}

fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// Reaps, without blocking, the members of group `pgid` that ended and
/// are this process's children (COMMAND's orphans, re-parented here).
fn reap_members(pgid: Pid) {
    let group = Pid::from_raw(-pgid.as_raw());
    let flags = WaitPidFlag::WNOHANG | WaitPidFlag::__WALL;
    while let Ok(status) = waitpid(group, Some(flags)) {
        if status == nix::sys::wait::WaitStatus::StillAlive {
            break;
        }
    }
}

/// How often [`wait_group`] looks again without a SIGCHLD: members that are
/// not this process's children end without telling it.
const GROUP_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Waits until every process of group `pgid` has ended, reaping those that
/// are this process's children. Start it only after COMMAND itself was
/// reaped, so that its status is not taken from its `Child`.
///
/// It never blocks in `waitpid(-pgid)`: Linux wakes such a wait only for a
/// child that is still in the group when it ends, so a child that left
/// the group (`setsid`) after the wait began would leave it asleep for
/// ever, and the lock held. Each SIGCHLD, and every [`GROUP_POLL`], it
/// reaps what ended and looks whether the group is empty.
pub async fn wait_group(pgid: Pid) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut child_ended = signal(SignalKind::child()).ok();
    loop {
        reap_members(pgid);
        if !group_alive(pgid) {
            return;
        }
        let poll = tokio::time::sleep(GROUP_POLL);
        match child_ended.as_mut() {
            Some(ended) => {
                tokio::select! {
                    _ = ended.recv() => {}
                    _ = poll => {}
                }
            }
            None => poll.await,
        }
    }
}
