//! What a shell does for its jobs, done by `lock run` for its own job.
//!
//! The job runs in a process group of its own, so a Ctrl-Z typed while it
//! has the terminal stops the job and not the tool. The tool's shell waits
//! for the tool, which it knows as its job: had the tool just kept waiting,
//! the shell would never have got its prompt back. So, when the tool finds
//! its job stopped and a shell with job control can take over (the tool has
//! a controlling terminal and its process group is not orphaned):
//!
//! 1. it takes the terminal back from the job's group, if it had handed it;
//! 2. it says on stderr that the command is stopped and the lock still held;
//! 3. it stops its own process group with the signal that stopped the job
//!    (the stop signals' default action, SIGSTOP as SIGSTOP), so the shell
//!    sees its job stopped, says so and prints its prompt.
//!
//! When the tool is continued (the shell's `fg` or `bg` send SIGCONT), it
//! hands the terminal to the job again if it is now in the terminal's
//! foreground (`fg`), and continues the job's group. In the background
//! (`bg`) the job runs without the terminal: when it reads from it, the
//! terminal stops it (SIGTTIN), and the tool stops in turn, as above.
//!
//! Job stops are seen on SIGCHLD, through `waitid(WSTOPPED | WCONTINUED)`
//! on the job's group ([`Job::take_reports`]), which never takes an exit
//! status.
//!
//! Without such a shell (no terminal, as under cron or a service manager,
//! or an orphaned group such as a session leader's), the tool keeps
//! supervising the stopped job as before, and says that it is stopped:
//! once for each stop, again only after the job was continued.
//!
//! In lease mode (`--lease`) a tool that stops itself cannot renew its
//! lease: its line says that the lock is kept only for the lease, and that
//! a run stopped longer may lose it (the loss is then handled when the
//! tool is continued).
//!
//! The watchdog spares a job that is stopped as a whole, however long the
//! tool stays stopped (see `watchdog`).

use std::future::Future;
use std::io::{self, IsTerminal, Write};
use std::task::Poll;

use nix::sys::signal::{killpg, sigprocmask, SigAction, SigSet, SigmaskHow, Signal};
use nix::unistd::{getpgrp, getpid, tcgetpgrp};
use tokio::signal::unix::{signal, SignalKind};

use crate::duration::format_duration;
use crate::job::Job;
use crate::proc_stat::Stat;
use crate::report;

/// What woke the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The tool was continued (SIGCONT).
    Continued,
    /// A child changed state (SIGCHLD): perhaps a process of the job stopped.
    ChildChanged,
    /// Time to look again at a job stopped only in part so far.
    LookAgain,
}

/// How often, and how many times, a job stopped in part is looked at again
/// before the tool takes it for a job that goes on running: a Ctrl-Z
/// reaches every process of the group at once, but each stops only when it
/// next runs.
const SETTLE_STEP: std::time::Duration = std::time::Duration::from_millis(5);
const SETTLE_LOOKS: u32 = 20;

/// Job control state of one `lock run`.
#[derive(Debug)]
pub struct JobControl {
    /// Whether a shell with job control can take over when the job stops.
    shell: bool,
    /// While the tool stops itself: the stop signal whose action was set to
    /// the default, and the action (the tool's handler) to put back.
    restore: Option<(Signal, SigAction)>,
    /// The lease (`--lease`) the tool must renew to keep its locks.
    lease: Option<std::time::Duration>,
    /// Whether the line about a stopped job without a shell was said for
    /// this stop.
    told: bool,
    /// Whether the line about a group stopped in part was said for this
    /// stop.
    told_partial: bool,
    /// The processes that reported a stop since the job was last
    /// continued: another stop report from one of them is a new stop.
    stopped: Vec<nix::unistd::Pid>,
    /// A job stopped in part: when to look again, how many looks are left,
    /// and the signal that stopped it.
    settling: Option<(std::pin::Pin<Box<tokio::time::Sleep>>, u32, Signal)>,
    continued: Option<tokio::signal::unix::Signal>,
    child: Option<tokio::signal::unix::Signal>,
}

impl JobControl {
    /// Starts watching for stops and continues; call before the job
    /// starts. `lease`: the run's `--lease`, if any.
    pub fn new(lease: Option<std::time::Duration>) -> Self {
        let shell = has_terminal() && !group_is_orphaned();
        tracing::debug!(shell, "job control");
        Self {
            shell,
            restore: None,
            lease,
            told: false,
            told_partial: false,
            stopped: Vec::new(),
            settling: None,
            continued: signal(SignalKind::from_raw(Signal::SIGCONT as i32)).ok(),
            child: signal(SignalKind::child()).ok(),
        }
    }

    /// The next event: a SIGCONT before a SIGCHLD that came with it, since
    /// a stop reported before the tool was continued is over.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an event not returned stays for the next call.
    pub async fn next(&mut self) -> Event {
        std::future::poll_fn(|cx| {
            if let Some(s) = self.continued.as_mut() {
                if s.poll_recv(cx).is_ready() {
                    return Poll::Ready(Event::Continued);
                }
            }
            if let Some(s) = self.child.as_mut() {
                if s.poll_recv(cx).is_ready() {
                    return Poll::Ready(Event::ChildChanged);
                }
            }
            if let Some((sleep, ..)) = self.settling.as_mut() {
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::LookAgain);
                }
            }
            Poll::Pending
        })
        .await
    }

    /// After a SIGCHLD: if the job is stopped, stops the tool too (under a
    /// job-control shell) or says that it is stopped (once for each stop).
    /// `what` names the locks; `lost`: the lock is gone and the job is being
    /// stopped for it, so its SIGKILL must not wait for a `fg`.
    pub fn child_changed(&mut self, job: &mut Job, what: &str, lost: bool) {
        let reports = job.take_reports();
        // Continued since the last stop (`kill -CONT -PGID`): the next stop
        // is a new one, and is told again.
        if reports.continued || reports.stopped.iter().any(|p| self.stopped.contains(p)) {
            self.stopped.clear();
            self.told = false;
            self.told_partial = false;
        }
        self.stopped.extend(reports.stopped);
        let Some(sig) = reports.stop else {
            return;
        };
        self.settling = None;
        self.stopped(job, sig, SETTLE_LOOKS, what, lost);
    }

    /// Looks again at a job stopped only in part (see [`Event::LookAgain`]).
    pub fn look_again(&mut self, job: &mut Job, what: &str, lost: bool) {
        if let Some((_, looks, sig)) = self.settling.take() {
            if crate::proc_stat::Stat::of(job.pgid.as_raw()).is_some_and(|s| s.is_stopped()) {
                self.stopped(job, sig, looks, what, lost);
            }
        }
    }

    /// The job's leader (or another child) is stopped by `sig`; `looks`:
    /// how many more times a group stopped only in part is looked at.
    fn stopped(&mut self, job: &mut Job, sig: Signal, looks: u32, what: &str, lost: bool) {
        let pgid = job.pgid;
        tracing::info!(%pgid, signal = sig.as_str(), shell = self.shell, "the command stopped");
        if lost {
            return;
        }
        // `fg` of a job that runs sends no SIGCONT: the shell only gives the
        // tool's group the terminal. A job that then reads or writes it is
        // stopped by the terminal, and finds the tool in the foreground: hand
        // the terminal over and go on, as the shell would have. Not in a
        // pipeline, which keeps the terminal: the job is stopped as a
        // background job that reads the terminal, and the tool with it.
        let reads_terminal = matches!(sig, Signal::SIGTTIN | Signal::SIGTTOU);
        let in_foreground = reads_terminal && job.terminal_in_foreground();
        if self.shell && in_foreground && job.terminal_after_continue() {
            job.signal(Signal::SIGCONT);
            return;
        }
        // A group stopped only in part still runs without a stopped tool's
        // answer for its lock, which the watchdog does not allow: keep
        // supervising it, and say so once.
        if !crate::proc_stat::group_stopped(pgid.as_raw()) {
            if looks > 0 {
                let next = Box::pin(tokio::time::sleep(SETTLE_STEP));
                self.settling = Some((next, looks - 1, sig));
                return;
            }
            if !std::mem::replace(&mut self.told_partial, true) {
                say_on_terminal(&format!(
                    "the command (pgid {pgid}) is stopped ({sig}) but other processes of its \
                     group still run; this run keeps {what} and goes on supervising them \
                     (`kill -CONT -{pgid}` resumes the stopped ones)"
                ));
            }
            return;
        }
        if !self.shell {
            if !std::mem::replace(&mut self.told, true) {
                let keeps = match self.lease {
                    // This process runs on, and renews the lease.
                    Some(lease) => format!(
                        "this run keeps {what} while it is stopped, as long as this process \
                         runs and renews its lease (were it stopped too, it could not renew it, \
                         and could lose the lock within {})",
                        format_duration(lease)
                    ),
                    None => format!("this run keeps {what} while it is stopped"),
                };
                say_on_terminal(&format!(
                    "the command (pgid {pgid}) is stopped ({sig}); {keeps} (`kill -CONT -{pgid}` \
                     resumes it, SIGTERM to eventsource (pid {}) ends it)",
                    getpid()
                ));
            }
            return;
        }
        job.restore_terminal();
        let keeps = match self.lease {
            Some(lease) => format!(
                "stopped, this run cannot renew its lease, so it keeps {what} only for the lease \
                 ({}): stopped longer, it may lose the lock to another holder, and `fg` then \
                 ends the command as for any lost lock",
                format_duration(lease)
            ),
            None => format!("this run keeps {what} while it is stopped"),
        };
        // The tool in the foreground kept the terminal: a pipeline's.
        let why = if in_foreground {
            " by the terminal, which it read or wrote while the pipeline that this run is a \
             stage of has it (in a pipeline the command does not get the terminal: give it \
             its input otherwise, or run it outside the pipeline)"
        } else {
            ""
        };
        say_on_terminal(&format!(
            "the command (pgid {pgid}) is stopped ({sig}){why}; {keeps} (`fg` resumes it)"
        ));
        self.stop_self(sig);
    }

    /// Stops the tool's own process group with the signal that stopped the
    /// job (or SIGTSTP), as the terminal would have stopped it.
    fn stop_self(&mut self, sig: Signal) {
        let sig = match sig {
            Signal::SIGSTOP | Signal::SIGTTIN | Signal::SIGTTOU => sig,
            _ => Signal::SIGTSTP,
        };
        if sig != Signal::SIGSTOP {
            // The tool catches SIGTSTP, and may have been started with a
            // stop signal ignored: its default action is what stops it. Put
            // back only once continued, so that whenever the signal is
            // taken it stops the process.
            match crate::signals::set_default(sig) {
                Ok(previous) => self.restore = Some((sig, previous)),
                Err(e) => tracing::warn!(error = %e, "cannot reset {sig}"),
            }
        }
        if let Err(e) = killpg(getpgrp(), sig) {
            tracing::warn!(error = %e, "cannot stop this process's group");
            self.put_back();
        }
    }

    fn put_back(&mut self) {
        if let Some((sig, action)) = self.restore.take() {
            crate::signals::restore(sig, &action);
        }
    }

    /// After a SIGCONT: under a job-control shell, gives the terminal to the
    /// job if the tool is in the foreground, and continues the job unless
    /// `hold` (the lock turned out lost while the tool was stopped: the loss
    /// handling continues it, after SIGTERM). Returns whether the job was
    /// continued.
    pub fn continued(&mut self, job: &mut Job, hold: bool) -> bool {
        self.put_back();
        if !self.shell {
            return false;
        }
        // Stop reports from before the SIGCONT are over.
        let _ = job.take_reports();
        self.stopped.clear();
        job.terminal_after_continue();
        if hold {
            return false;
        }
        job.signal(Signal::SIGCONT);
        true
    }
}

/// Whether one of the standard streams is this process's controlling
/// terminal (`tcgetpgrp` fails for any other file).
fn has_terminal() -> bool {
    tcgetpgrp(io::stdin()).is_ok()
        || tcgetpgrp(io::stdout()).is_ok()
        || tcgetpgrp(io::stderr()).is_ok()
}

/// Whether this process's group is orphaned: no parent outside the group
/// but inside the session, i.e. no shell to report a stop to and resume it
/// (the kernel then discards the terminal's stop signals for the group).
/// Looks at this process's ancestors within its group.
fn group_is_orphaned() -> bool {
    let group = getpgrp().as_raw();
    let Some(mut me) = Stat::of(getpid().as_raw()) else {
        return true;
    };
    // Bounded: a chain of ancestors in one group is short.
    for _ in 0..64 {
        let Some(parent) = (me.ppid > 0).then(|| Stat::of(me.ppid)).flatten() else {
            return true;
        };
        if parent.pgrp != group {
            return parent.session != me.session;
        }
        me = parent;
    }
    true
}

/// Reports `line` when the tool may be in the background: with SIGTTOU
/// blocked, so that a terminal with `tostop` set does not stop the tool on
/// the write; after a line break on a terminal, since the line usually
/// follows the terminal's echo of `^Z` or a prompt.
fn say_on_terminal(line: &str) {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let blocked = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_ok();
    if io::stderr().is_terminal() {
        let _ = io::stderr().write_all(b"\n");
    }
    report!("{line}");
    if blocked {
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
}
