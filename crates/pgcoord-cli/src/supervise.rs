//! Supervising the job while the lock is held: forward signals, stop the
//! whole process group when the lock is lost, heartbeat the watchdog, hand
//! a stopped job over to the shell (`job_control`), and wait for every
//! process of the group before the lock may be released.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::{Instant, MissedTickBehavior};

use pgcoord::LossSignal;

use crate::duration::format_duration;
use crate::held::Held;
use crate::job::{self, Job};
use crate::job_control::{Event, JobControl};
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
    /// Whether the job was stopped as a whole (Ctrl-Z, `kill -STOP`) when
    /// the loss was found.
    pub lost_while_stopped: bool,
    /// Whether COMMAND held the terminal the tool handed it when it ended
    /// (a Ctrl-C then reached its group, not the tool's).
    pub held_terminal: bool,
}

/// How the lock was lost, as its loss signal knows it (the server's own
/// words when it ended the session, a liveness check or a lease that ran
/// out), else as much as is sure.
fn how_lost(loss: &LossSignal) -> std::borrow::Cow<'static, str> {
    loss.reason()
        .unwrap_or("its database session ended or stopped answering".into())
}

/// The time between SIGTERM and SIGKILL after a loss.
#[derive(Debug, Clone, Copy)]
pub struct Grace {
    /// `--kill-grace`.
    pub kill: Duration,
    /// Whether the run has a `--lease` (for the words of a cut grace).
    pub leased: bool,
}

/// The time between SIGTERM and SIGKILL after a loss: `grace`, cut to what
/// remains of the time the server last confirmed it keeps the silent
/// session (`confirmed_until`: the lease, or without one the server's TCP
/// timeouts), so that a holder cut off from the server has killed its
/// command before the server can free the lock for silence; with the
/// words that say it was cut.
fn grace_after_loss(
    grace: Grace,
    confirmed_until: Option<std::time::Instant>,
) -> (Duration, &'static str) {
    let Some(until) = confirmed_until else {
        return (grace.kill, "");
    };
    let left = until.saturating_duration_since(std::time::Instant::now());
    match (left, grace.leased) {
        (l, _) if l >= grace.kill => (grace.kill, ""),
        (l, true) if l.is_zero() => (
            Duration::ZERO,
            " at once: its lease has run out, and the server may give the lock to another holder now",
        ),
        (l, true) => (
            l,
            " (--kill-grace cut to what remains of the lease: a server that only lost touch with the session may give the lock to another holder then; one that ended the session already has)",
        ),
        (l, false) if l.is_zero() => (
            Duration::ZERO,
            " at once: the server may already have given up on the silent session and given the lock to another holder",
        ),
        (l, false) => (
            l,
            " (--kill-grace cut to what remains before a server that lost touch with the session may give up on it and give the lock to another holder; one that ended the session already has)",
        ),
    }
}

/// Whether a forwarded `sig` is followed by SIGCONT: the signals that
/// end a process by default and are sent to end the job (SIGUSR1 and
/// SIGUSR2 often ask a program for something else, and SIGTSTP stops it).
fn ends_a_stopped_job(sig: Signal) -> bool {
    matches!(
        sig,
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT | Signal::SIGALRM
    )
}

/// Before the job starts: catches SIGTSTP and SIGTTIN from now on (a
/// Ctrl-Z that reaches the tool stops the job; before this, it stops the
/// tool, as it should while the tool waits for the lock), and starts watching for the
/// job's stops. Done before the spawn, so that a signal or a stop that
/// comes as soon as the job runs finds them ready.
/// `lease`: the run's `--lease`, which a stopped tool cannot renew.
pub fn prepare(signals: &mut Signals, lease: Option<Duration>) -> JobControl {
    if let Err(e) = signals.catch_stop() {
        tracing::debug!(error = %e, "cannot catch SIGTSTP; a Ctrl-Z stops the tool");
    }
    JobControl::new(lease)
}

/// Waits for COMMAND and then for every other process of its group,
/// forwarding signals to the group and stopping the group if the lock (any
/// lock of `held`) is lost (SIGTERM, SIGKILL after `grace`). `what` names
/// the locks in messages ([`crate::multi::describe`]). `signals` and
/// `job_control` were set up before the job started ([`prepare`]), so that
/// nothing it does early is missed.
pub async fn supervise(
    job: &mut Job,
    held: &Held,
    what: &str,
    signals: &mut Signals,
    job_control: &mut JobControl,
    grace: Grace,
    watchdog: &mut Watchdog,
) -> io::Result<Ended> {
    let pgid = job.pgid;
    let loss = held.loss_signal();
    let mut lost = false;
    let mut lost_while_stopped = false;
    let mut kill_at: Option<Instant> = None;
    let mut kill_grace = grace.kill;
    let mut status: Option<ExitStatus> = None;
    // Replaced by the wait for the rest of the group once COMMAND exited.
    let mut rest_of_group: Pin<Box<dyn Future<Output = ()> + Send>> =
        Box::pin(std::future::pending());
    let mut waiting_for_group = false;
    let mut held_terminal = false;
    let mut beat = tokio::time::interval(watchdog.interval());
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut watchdog_alive = true;
    loop {
        tokio::select! {
            exited = job.child.wait(), if status.is_none() => {
                status = Some(exited?);
                held_terminal = job.holds_terminal();
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
                if ends_a_stopped_job(sig) {
                    // A stopped job (Ctrl-Z) would keep the signal pending,
                    // and the lock held, until someone resumed it.
                    job.signal(Signal::SIGCONT);
                }
            }
            event = job_control.next() => match event {
                Event::ChildChanged => job_control.child_changed(job, what, lost),
                Event::LookAgain => job_control.look_again(job, what, lost),
                Event::Continued => {
                    // The watchdog hears from the tool before the job runs
                    // (a watchdog gone is noticed at the next beat).
                    let _ = watchdog.beat();
                    // A lock lost while the tool was stopped is handled
                    // first (SIGTERM, then SIGCONT): a lease that ran out
                    // shows at once, and a session the server ended once
                    // its connection has read what arrived meanwhile (it
                    // runs when this task yields).
                    tokio::task::yield_now().await;
                    let hold = !lost && held.is_lost();
                    if job_control.continued(job, hold) {
                        tracing::info!(%pgid, "continued the command's process group");
                    }
                }
            },
            _ = loss.lost(), if !lost => {
                lost = true;
                lost_while_stopped = crate::proc_stat::group_stopped(pgid.as_raw());
                let gone = held.lost_name(what);
                let (grace, why) = grace_after_loss(grace, loss.confirmed_until());
                if grace.is_zero() {
                    report!(
                        "{gone} was lost ({}); \
                         sending SIGKILL to the command's process group (pgid {pgid}){why}",
                        how_lost(&loss)
                    );
                    job.signal(Signal::SIGKILL);
                } else {
                    report!(
                        "{gone} was lost ({}); \
                         sending SIGTERM to the command's process group (pgid {pgid}), SIGKILL in {}{why}",
                        how_lost(&loss),
                        format_duration(grace)
                    );
                    job.signal(Signal::SIGTERM);
                    job.signal(Signal::SIGCONT);
                    kill_at = Some(Instant::now() + grace);
                    kill_grace = grace;
                }
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                kill_at = None;
                report!(
                    "the command's process group (pgid {pgid}) still runs {} after SIGTERM; \
                     sending SIGKILL",
                    format_duration(kill_grace)
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
        lost_while_stopped,
        held_terminal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_cuts_the_grace_to_what_remains_of_it() {
        let secs = Duration::from_secs;
        let now = std::time::Instant::now();
        let grace = |kill, leased| Grace { kill, leased };
        let ten = grace(secs(10), true);
        assert_eq!(grace_after_loss(ten, None), (secs(10), ""));
        let (far, why) = grace_after_loss(ten, Some(now + secs(60)));
        assert_eq!((far, why), (secs(10), ""));
        let (cut, why) = grace_after_loss(ten, Some(now + secs(2)));
        assert!(cut <= secs(2) && cut > secs(1), "{cut:?}");
        assert!(why.contains("cut to what remains of the lease"), "{why}");
        // True whether the session went silent or ended.
        assert!(
            why.contains("one that ended the session already has"),
            "{why}"
        );
        let (none, why) = grace_after_loss(ten, Some(now));
        assert_eq!(none, Duration::ZERO);
        assert!(why.contains("lease has run out"), "{why}");
        assert_eq!(
            grace_after_loss(grace(Duration::ZERO, true), Some(now + secs(2))).0,
            Duration::ZERO
        );
    }

    #[test]
    fn the_servers_tcp_timeouts_cut_the_grace_without_a_lease() {
        let secs = Duration::from_secs;
        let now = std::time::Instant::now();
        let ten = Grace {
            kill: secs(10),
            leased: false,
        };
        let (cut, why) = grace_after_loss(ten, Some(now + secs(2)));
        assert!(cut <= secs(2) && cut > secs(1), "{cut:?}");
        assert!(
            why.contains("lost touch with the session may give up on it"),
            "{why}"
        );
        assert!(
            why.contains("one that ended the session already has"),
            "{why}"
        );
        assert!(!why.contains("lease"), "{why}");
        let (none, why) = grace_after_loss(ten, Some(now));
        assert_eq!(none, Duration::ZERO);
        assert!(why.contains("may already have given up"), "{why}");
    }
}
