//! The signals the tool catches: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
//! SIGUSR2 and SIGALRM (every signal whose default action ends a process and
//! that a process can catch, except SIGPIPE, which Rust ignores).
//!
//! Catching them replaces their default action (ending the tool), so the
//! tool decides: end a wait for the lock, or forward them to the command.

use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// Streams of the caught signals.
#[derive(Debug)]
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
    alrm: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts catching the signals (from now on they no longer end the tool).
    pub fn catch() -> io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
            alrm: signal(SignalKind::alarm())?,
        })
    }

    /// The next caught signal.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal that arrives while no one waits is kept for the
    /// next call.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
            _ = self.usr1.recv() => Signal::SIGUSR1,
            _ = self.usr2.recv() => Signal::SIGUSR2,
            _ = self.alrm.recv() => Signal::SIGALRM,
        }
    }
}
