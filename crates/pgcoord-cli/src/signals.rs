//! The signals the tool catches: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
//! SIGUSR2 and SIGALRM (every signal whose default action ends a process and
//! that a process can catch, except SIGPIPE, which Rust ignores), and,
//! while a job runs, SIGTSTP and SIGTTIN.
//!
//! Catching them replaces their default action (ending the tool), so the
//! tool decides: end a wait for the lock, or forward them to the command.
//! A signal the tool was started with ignored (`nohup` ignores SIGHUP, a
//! shell without job control SIGINT and SIGQUIT for `cmd &`) is left
//! ignored, as shells and `nohup` expect: it neither ends a wait nor
//! reaches the job, which inherits the ignore.
//!
//! A run that a shell started as a foreground job and that ends because of
//! SIGINT or SIGQUIT dies of that signal at exit ([`die_of_at_exit`],
//! [`exit`]) instead of exiting 128+N: bash stops a loop or script only
//! when its foreground child *died* of SIGINT ("wait and cooperative
//! exit"), so a Ctrl-C in `while :; do eventsource lock run ...; done`
//! would otherwise start the next round.
//!
//! A shell also wants to have received the signal itself. When the tool
//! handed the terminal to the job (`job`), a typed Ctrl-C reaches the
//! job's group only, not the tool's: not a script's shell, a wrapper
//! program or the other stages of a pipeline that share the tool's group.
//! So when COMMAND died of SIGINT or SIGQUIT while it held the terminal,
//! and the tool was not sent that signal itself (it came from the
//! terminal, not from a `kill` to the tool), the tool, once cleaned up and
//! with the terminal taken back, sends it to its own process group, as
//! the terminal would have, and dies of it with them.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use nix::sys::signal::{
    killpg, raise, sigaction, sigprocmask, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow,
    Signal,
};
use tokio::signal::unix::{signal, SignalKind};

/// Streams of the caught signals.
#[derive(Debug)]
pub struct Signals {
    caught: Vec<(Signal, tokio::signal::unix::Signal)>,
    /// The last signal [`Signals::recv`] returned.
    received: Option<Signal>,
    /// Every signal [`Signals::recv`] returned, one bit each.
    seen: u64,
}

/// The signals [`Signals::catch`] catches.
pub const CAUGHT: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
];

/// Whether `sig` was ignored when the tool started (and nothing caught it
/// since: a caught signal is never reported ignored). There is no way to
/// read a disposition without writing one, so it is set to "ignore" and
/// put back at once.
fn inherited_ignored(sig: Signal) -> bool {
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: installs SIG_IGN, then restores the previous action exactly
    // as the kernel returned it; no handler of ours is involved.
    #[allow(unsafe_code)]
    let previous = unsafe { sigaction(sig, &ignore) };
    match previous {
        Ok(previous) => {
            // SAFETY: as above, the action read back a moment ago.
            #[allow(unsafe_code)]
            let _ = unsafe { sigaction(sig, &previous) };
            previous.handler() == SigHandler::SigIgn
        }
        Err(_) => false,
    }
}

fn stream(sig: Signal) -> io::Result<tokio::signal::unix::Signal> {
    signal(SignalKind::from_raw(sig as i32))
}

impl Signals {
    /// Starts catching the signals (from now on they no longer end the
    /// tool), but for those it was started with ignored.
    pub fn catch() -> io::Result<Self> {
        let mut caught = Vec::with_capacity(CAUGHT.len() + 1);
        for sig in CAUGHT {
            if !inherited_ignored(sig) {
                caught.push((sig, stream(sig)?));
            }
        }
        Ok(Self {
            caught,
            received: None,
            seen: 0,
        })
    }

    /// Also catches SIGTSTP and SIGTTIN, for a running job: a Ctrl-Z typed
    /// while the tool, not the job, has the terminal (its standard input
    /// is not the terminal, or it is a stage of a pipeline) stops the job
    /// first; so does a read of the terminal by another process of the
    /// tool's group while that group is in the background (a pipeline's
    /// `less` after `bg`), which would otherwise have stopped the tool
    /// alone, and had its watchdog kill the running job. Under a
    /// job-control shell the tool then stops itself as well (see
    /// `job_control`); otherwise it keeps supervising the stopped job, and
    /// keeps answering for its lock. (Not SIGTTOU: the tool writes to the
    /// terminal itself, and a caught SIGTTOU would have the kernel restart
    /// such a write for ever; it blocks SIGTTOU for its own lines.)
    pub fn catch_stop(&mut self) -> io::Result<()> {
        for sig in [Signal::SIGTSTP, Signal::SIGTTIN] {
            if !inherited_ignored(sig) && !self.caught.iter().any(|(s, _)| *s == sig) {
                self.caught.push((sig, stream(sig)?));
            }
        }
        Ok(())
    }

    /// The next caught signal.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal that arrives while no one waits is kept for the
    /// next call.
    pub async fn recv(&mut self) -> Signal {
        let sig = std::future::poll_fn(|cx| {
            for (sig, stream) in &mut self.caught {
                if stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*sig);
                }
            }
            std::task::Poll::Pending
        })
        .await;
        self.received = Some(sig);
        self.seen |= 1 << (sig as u32);
        sig
    }

    /// The last signal received ([`Signals::recv`]), if any.
    pub fn received(&self) -> Option<Signal> {
        self.received
    }

    /// Whether `sig` was ever received ([`Signals::recv`]).
    pub fn has_received(&self, sig: Signal) -> bool {
        self.seen & (1 << (sig as u32)) != 0
    }
}

/// The signal [`exit`] dies of; 0 for none.
static DIE_OF: AtomicI32 = AtomicI32::new(0);
/// Whether [`exit`] sends that signal to the tool's whole process group.
static TO_GROUP: AtomicBool = AtomicBool::new(false);

/// Has [`exit`] end the process by `sig` (SIGINT or SIGQUIT) rather than
/// with 128+N, when `foreground` (the tool was started as a foreground job
/// of its terminal, [`crate::job::in_terminal_foreground`]) and the run's
/// `code` is 128+N: the run ended because of the signal. Without a
/// terminal (a service manager, a script, a test harness) the exit code
/// stays 128+N.
///
/// `from_terminal`: COMMAND died of `sig` while it held the terminal the
/// tool handed it, and the tool was not sent `sig` itself. The terminal
/// then sent it to COMMAND's group alone; [`exit`] sends it to the tool's
/// own group as well (a script's shell, the other stages of a pipeline),
/// as the terminal would have without the hand-over.
pub fn die_of_at_exit(foreground: bool, sig: Option<Signal>, code: i32, from_terminal: bool) {
    let Some(sig) = sig.filter(|s| matches!(s, Signal::SIGINT | Signal::SIGQUIT)) else {
        return;
    };
    if (foreground || from_terminal) && code == crate::exit::SIGNAL_BASE + sig as i32 {
        DIE_OF.store(sig as i32, Ordering::Relaxed);
        TO_GROUP.store(from_terminal, Ordering::Relaxed);
    }
}

/// Ends the process with `code`, or, when [`die_of_at_exit`] asked for
/// signal N and `code` is 128+N, by signal N (its default action put back,
/// unblocked, raised, or sent to the tool's whole process group when the
/// terminal sent it to COMMAND only), so that the shell sees its job die
/// of it. Call once everything is cleaned up (the terminal taken back).
pub fn exit(code: i32) -> ! {
    let sig = DIE_OF.load(Ordering::Relaxed);
    if sig != 0 && code == crate::exit::SIGNAL_BASE + sig {
        if let Ok(sig) = Signal::try_from(sig) {
            let _ = io::stderr().flush();
            // SIGQUIT's default action dumps core: not of the tool, whose
            // state is of no interest (COMMAND's own dump, if any, is
            // COMMAND's).
            if sig == Signal::SIGQUIT {
                let _ = nix::sys::prctl::set_dumpable(false);
            }
            if let Err(e) = set_default(sig) {
                tracing::debug!(signal = sig.as_str(), error = %e, "cannot reset the signal");
            }
            let mut set = SigSet::empty();
            set.add(sig);
            let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
            if TO_GROUP.load(Ordering::Relaxed) {
                // The tool is of the group: it dies of it with the others.
                if let Err(e) = killpg(nix::unistd::getpgrp(), sig) {
                    tracing::debug!(signal = sig.as_str(), error = %e, "cannot signal this process's group");
                }
            }
            let _ = raise(sig);
        }
    }
    std::process::exit(code)
}

/// Sets the action of `sig` to its default (for the stop signals: stop the
/// process) and returns the action it replaced, for [`restore`].
pub fn set_default(sig: Signal) -> nix::Result<SigAction> {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: installs SIG_DFL, which runs no code of ours; the action it
    // replaces is returned unchanged, to be put back by `restore`.
    #[allow(unsafe_code)]
    unsafe {
        sigaction(sig, &default)
    }
}

/// Puts back an action [`set_default`] replaced.
pub fn restore(sig: Signal, action: &SigAction) {
    // SAFETY: the action exactly as the kernel returned it a moment ago
    // (the tokio handler it had, or the default).
    #[allow(unsafe_code)]
    let restored = unsafe { sigaction(sig, action) };
    if let Err(e) = restored {
        tracing::warn!(signal = sig.as_str(), error = %e, "cannot restore a signal action");
    }
}
