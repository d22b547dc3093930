//! SIGINT (Ctrl-C) and SIGTERM: the run stops its scenarios, drops what it
//! created ([`leftovers::take_away`](crate::leftovers::take_away)) and
//! exits with 130 or 143, as a shell reports a process those signals ended.

use std::fmt;
use std::future::Future;

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::probe::Monitor;
use crate::{errors, leftovers, Res};

/// The run was stopped by a signal (an error, so it unwinds like one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    pub signal: &'static str,
    /// 128 + the signal's number.
    pub exit_code: u8,
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted by {}", self.signal)
    }
}

impl std::error::Error for Interrupted {}

/// SIGINT and SIGTERM, caught from [`Signals::install`] on (instead of
/// ending the process at once).
pub struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    pub fn install() -> Res<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// The next of the two signals.
    pub async fn recv(&mut self) -> Interrupted {
        tokio::select! {
            _ = self.int.recv() => Interrupted { signal: "SIGINT", exit_code: 130 },
            _ = self.term.recv() => Interrupted { signal: "SIGTERM", exit_code: 143 },
        }
    }
}

/// Runs `run` unless a signal comes first: then `run` is dropped (the
/// scenarios' futures, and with them their sessions and advisory locks),
/// what the run registered as its own is dropped on the monitor's session,
/// and the result is [`Interrupted`].
pub async fn or_stop(
    run: impl Future<Output = Res<()>>,
    signals: &mut Signals,
    monitor: &Monitor,
) -> Res<()> {
    tokio::select! {
        result = run => result,
        stop = signals.recv() => {
            eprintln!("{stop}: stopping the run and dropping what it created");
            match leftovers::take_away(monitor.client()).await {
                Ok(done) if done.is_empty() => {}
                Ok(done) => eprintln!("dropped {}", done.join(", ")),
                Err(e) => eprintln!(
                    "cannot drop what the run created: {}",
                    errors::describe(&*e)
                ),
            }
            Err(Box::new(stop))
        }
    }
}
