//! The watchdog: a small process that stops COMMAND's process group when
//! the tool stops answering.
//!
//! The tool is the only process that knows whether the lock is still held,
//! and a stopped tool (SIGSTOP, a debugger, swapped out) cannot stop
//! COMMAND when the server ends its session. So before COMMAND starts, the
//! tool starts this same program as `eventsource watchdog` in a process
//! group of its own, with a pipe on its standard input. Over the pipe:
//!
//! - `p PID`: COMMAND's pid and process group, written by COMMAND's own
//!   process between fork and exec, so it is known before COMMAND runs;
//! - `h`: a heartbeat from the tool's event loop, every quarter of the bound;
//! - `d`: the tool is done with COMMAND; the watchdog exits quietly.
//!
//! When no heartbeat came for the bound (`--watchdog`), or the pipe closed
//! without `d` (the tool died), the watchdog sends SIGKILL to the group and
//! exits with [`KILLED`]. It blocks the signals that would end it quietly
//! (SIGINT, SIGTERM, SIGHUP, ...); only SIGKILL ends it.
//!
//! A job that is stopped does no work, so a silent tool is not held against
//! it: when the bound has passed but every process of the group is stopped
//! (a Ctrl-Z stops the job, then the tool stops itself so that its shell
//! takes over: see `job_control`), the watchdog spares the group and looks
//! again every quarter of the bound. Once a process of the group runs
//! again while the tool is still silent, the group is killed a bound after
//! it was last seen stopped: a job never runs longer than the bound while
//! the tool cannot answer for its lock.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{killpg, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;
use tokio::process::Child;

use crate::duration::format_duration;

/// The watchdog's exit code when it killed COMMAND's group.
pub const KILLED: i32 = 3;

/// The tool's end of a running watchdog.
#[derive(Debug)]
pub struct Watchdog {
    child: Child,
    pipe: Option<std::fs::File>,
    bound: Duration,
}

impl Watchdog {
    /// Starts the watchdog (this same program, in a process group of its own).
    pub fn spawn(bound: Duration) -> io::Result<Self> {
        // This very program, even if its file was replaced or removed since
        // it started (an upgrade while a job runs).
        let mut child = tokio::process::Command::new("/proc/self/exe")
            .arg("watchdog")
            .arg("--bound-ms")
            .arg(bound.as_millis().max(1).to_string())
            .env_remove("DATABASE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .kill_on_drop(false)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no pipe to the watchdog"))?;
        let fd: OwnedFd = stdin.into_owned_fd()?;
        // Heartbeats never block the tool: a full pipe means the watchdog
        // is not reading, and one more heartbeat would not help.
        let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
        fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        Ok(Self {
            child,
            pipe: Some(std::fs::File::from(fd)),
            bound: bound.max(Duration::from_millis(1)),
        })
    }

    /// The pipe's write end, for COMMAND to announce its pid on.
    pub fn fd(&self) -> Option<RawFd> {
        self.pipe.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// How often to call [`beat`](Self::beat).
    pub fn interval(&self) -> Duration {
        self.bound / 4
    }

    /// Sends a heartbeat; false once the watchdog is gone.
    pub fn beat(&mut self) -> bool {
        self.send(b"h\n")
    }

    fn send(&mut self, msg: &[u8]) -> bool {
        let Some(pipe) = self.pipe.as_mut() else {
            return false;
        };
        match pipe.write(msg) {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => true,
            Err(_) => {
                self.pipe = None;
                false
            }
        }
    }

    /// Whether the watchdog has exited after killing COMMAND's group (its
    /// pipe just closed, so its exit is a moment away at most: waited for
    /// briefly). The status stays for [`finish`](Self::finish).
    pub async fn has_killed(&mut self) -> bool {
        let exited = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
        matches!(exited, Ok(Ok(status)) if status.code() == Some(KILLED))
    }

    /// Tells the watchdog that COMMAND's group has ended and waits for it
    /// (briefly). True when it had killed the group before.
    pub async fn finish(mut self) -> bool {
        self.send(b"d\n");
        drop(self.pipe.take());
        let waited = tokio::time::timeout(self.bound + Duration::from_secs(5), self.child.wait());
        match waited.await {
            Ok(Ok(status)) => status.code() == Some(KILLED),
            _ => {
                let _ = self.child.start_kill();
                false
            }
        }
    }

    /// The bound it enforces.
    pub fn bound(&self) -> Duration {
        self.bound
    }
}

/// Blocks the signals that would otherwise end the watchdog before its job.
fn block_signals() {
    let mut set = SigSet::empty();
    // The tool's own (which it forwards to the job), and those that stop
    // or end a process writing to a closed pipe or a terminal.
    let more = [Signal::SIGPIPE, Signal::SIGTTIN, Signal::SIGTTOU];
    for sig in crate::signals::CAUGHT.into_iter().chain(more) {
        set.add(sig);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

fn group_stopped(pgid: Pid) -> bool {
    crate::proc_stat::group_stopped(pgid.as_raw())
}

/// How long to wait for the tool before looking again, given its last
/// heartbeat at `last`; or why group `group` must be killed now. Past the
/// bound, a group stopped as a whole is spared (and looked at again every
/// quarter of the bound); one that runs is killed, at the latest a bound
/// after it was last seen stopped.
fn next_look(
    group: Pid,
    bound: Duration,
    last: Instant,
    stopped_seen: &mut Option<Instant>,
    parent: Pid,
) -> Result<Duration, String> {
    let left = bound.saturating_sub(last.elapsed());
    if !left.is_zero() {
        return Ok(left);
    }
    let look_again = (bound / 4).max(Duration::from_millis(1));
    if group_stopped(group) {
        if stopped_seen.is_none() {
            tracing::debug!(
                "watchdog: the supervising eventsource (pid {parent}) has not answered for {}, \
                 but the command's process group (pgid {group}) is stopped too: it is spared \
                 while it stays stopped",
                format_duration(bound)
            );
        }
        *stopped_seen = Some(Instant::now());
        return Ok(look_again);
    }
    match *stopped_seen {
        None => Err(format!(
            "the supervising eventsource (pid {parent}) has not answered for {} \
             (stopped, traced or starved?)",
            format_duration(bound)
        )),
        Some(seen) if seen.elapsed() >= bound => Err(format!(
            "the supervising eventsource (pid {parent}) has not answered for {}, and the \
             command's process group, last seen stopped {} ago, runs again (continued while \
             eventsource stays stopped?)",
            format_duration(last.elapsed()),
            format_duration(seen.elapsed())
        )),
        Some(seen) => Ok(bound.saturating_sub(seen.elapsed()).min(look_again)),
    }
}

fn kill_group(pgid: Pid, why: &str) -> i32 {
    let _ = killpg(pgid, Signal::SIGKILL);
    crate::report!(
        "watchdog: {why}; sent SIGKILL to the command's process group (pgid {pgid}): \
         it must not run on without the lock"
    );
    KILLED
}

/// `eventsource watchdog`: the process side; returns its exit code.
pub fn run(bound: Duration) -> i32 {
    block_signals();
    // SAFETY (of the borrow): fd 0 stays open for the life of the process.
    #[allow(unsafe_code)]
    let stdin = unsafe { BorrowedFd::borrow_raw(0) };
    let parent = nix::unistd::getppid();
    let mut pgid: Option<Pid> = None;
    // The last heartbeat (or the pid), and, while the tool is silent
    // past the bound, when the group was last seen stopped as a whole.
    let mut last = Instant::now();
    let mut stopped_seen: Option<Instant> = None;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let timeout = match pgid {
            None => PollTimeout::NONE,
            Some(group) => match next_look(group, bound, last, &mut stopped_seen, parent) {
                Ok(wait) => PollTimeout::try_from(wait.max(Duration::from_millis(1)))
                    .unwrap_or(PollTimeout::MAX),
                Err(why) => return kill_group(group, &why),
            },
        };
        let mut fds = [PollFd::new(stdin, PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return pgid.map_or(0, |g| kill_group(g, "cannot read the pipe")),
        }
        let n = match nix::unistd::read(stdin, &mut chunk) {
            Ok(n) => n,
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(_) => 0,
        };
        if n == 0 {
            return match pgid {
                Some(g) => kill_group(
                    g,
                    &format!("the supervising eventsource (pid {parent}) died"),
                ),
                None => 0,
            };
        }
        pending.extend_from_slice(&chunk[..n]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            match line.first() {
                Some(b'h') => {
                    last = Instant::now();
                    stopped_seen = None;
                }
                Some(b'd') => return 0,
                Some(b'p') => {
                    let text = String::from_utf8_lossy(&line[1..]);
                    // Never 0 or 1: killpg would hit our own group or init's.
                    if let Ok(pid @ 2..) = text.trim().parse::<i32>() {
                        pgid = Some(Pid::from_raw(pid));
                        last = Instant::now();
                        stopped_seen = None;
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_group_counts_as_stopped_only_while_its_processes_are() {
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .expect("sleep runs");
        let pid = Pid::from_raw(child.id() as i32);
        assert!(!group_stopped(pid));
        killpg(pid, Signal::SIGSTOP).unwrap();
        let stopped = waitpid(pid, Some(WaitPidFlag::WUNTRACED)).unwrap();
        assert_eq!(stopped, WaitStatus::Stopped(pid, Signal::SIGSTOP));
        assert!(group_stopped(pid));
        killpg(pid, Signal::SIGCONT).unwrap();
        let continued = waitpid(pid, Some(WaitPidFlag::WCONTINUED)).unwrap();
        assert_eq!(continued, WaitStatus::Continued(pid));
        assert!(!group_stopped(pid));
        child.kill().unwrap();
        child.wait().unwrap();
        // Gone: nothing is stopped, and the group is killed as before.
        assert!(!group_stopped(pid));
    }
}
