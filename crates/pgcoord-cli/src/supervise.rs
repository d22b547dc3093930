//! Supervising the job while the lock is held: forward signals, stop the
//! whole process group when the lock is lost, heartbeat the watchdog, and
//! wait for every process of the group before the lock may be released.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::{Instant, MissedTickBehavior};

use crate::duration::format_duration;
use crate::held::Held;
use crate::job::{self, Job};
use crate::report;
use crate::signals::Signals;
use crate::watchdog::Watchdog;

/// How the job ended.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// COMMAND's own exit status.
    pub status: ExitStatus,
    /// Whether the lock was lost while the job ran.
    pub lost: bool,
}

/// Waits for COMMAND and then for every other process of its group,
/// forwarding signals to the group and stopping the group if the lock (any
/// lock of `held`) is lost (SIGTERM, SIGKILL after `grace`). `what` names
/// the locks in messages ([`crate::multi::describe`]).
pub async fn supervise(
    job: &mut Job,
    held: &Held,
    what: &str,
    signals: &mut Signals,
    grace: Duration,
    watchdog: &mut Watchdog,
) -> io::Result<Ended> {
    let pgid = job.pgid;
    let loss = held.loss_signal();
    let mut lost = false;
    let mut kill_at: Option<Instant> = None;
    let mut status: Option<ExitStatus> = None;
    // Replaced by the wait for the rest of the group once COMMAND exited.
    let mut rest_of_group: Pin<Box<dyn Future<Output = ()> + Send>> =
        Box::pin(std::future::pending());
    let mut waiting_for_group = false;
    let mut beat = tokio::time::interval(watchdog.interval());
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut watchdog_alive = true;
    loop {
        tokio::select! {
            exited = job.child.wait(), if status.is_none() => {
                status = Some(exited?);
                if !job.group_alive() {
                    break;
                }
                if !lost {
                    report!(
                        "the command exited, but processes it started still run in its process \
                         group (pgid {pgid}); holding {what} until they have ended"
                    );
                }
                rest_of_group = Box::pin(job::wait_group(pgid));
                waiting_for_group = true;
            }
            _ = &mut rest_of_group, if waiting_for_group => break,
            sig = signals.recv() => {
                tracing::info!(signal = sig.as_str(), %pgid, "forwarding signal to the command's process group");
                job.signal(sig);
            }
            _ = loss.lost(), if !lost => {
                lost = true;
                let gone = held.lost_name(what);
                if grace.is_zero() {
                    report!(
                        "{gone} was lost (its database session ended); \
                         sending SIGKILL to the command's process group (pgid {pgid})"
                    );
                    job.signal(Signal::SIGKILL);
                } else {
                    report!(
                        "{gone} was lost (its database session ended); \
                         sending SIGTERM to the command's process group (pgid {pgid}), SIGKILL in {}",
                        format_duration(grace)
                    );
                    job.signal(Signal::SIGTERM);
                    kill_at = Some(Instant::now() + grace);
                }
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                kill_at = None;
                report!(
                    "the command's process group (pgid {pgid}) still runs {} after SIGTERM; \
                     sending SIGKILL",
                    format_duration(grace)
                );
                job.signal(Signal::SIGKILL);
            }
            _ = beat.tick(), if watchdog_alive => {
                // Gone after its kill, or after COMMAND exited: nothing
                // left for it to stop, and the end reports the kill.
                if !watchdog.beat() {
                    watchdog_alive = false;
                    if status.is_some() || watchdog.has_killed().await {
                        continue;
                    }
                    report!(
                        "warning: the watchdog process is gone; if this process stops, \
                         nothing stops the command"
                    );
                }
            }
        }
    }
    job.restore_terminal();
    Ok(Ended {
        status: status.expect("COMMAND was reaped"),
        lost,
    })
}
