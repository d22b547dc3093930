//! `eventsource lock run`: acquire, run the command as a child, supervise it,
//! release.
//!
//! Supervision rules (the lock logic itself is the library's):
//! - signals caught while waiting for the lock end the wait (exit 128+N);
//! - signals caught while the child runs are forwarded to it, and the lock
//!   is released only after it has exited;
//! - a lost lock stops the child (SIGTERM, SIGKILL after the grace period);
//! - the child gets SIGKILL from the kernel if the tool dies (Linux
//!   parent-death signal), since its lock dies with the tool's session.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use eventsource::adapters::postgres::{AdvisoryLock, LockSession, PostgresLockManager};
use eventsource::{DistributedLock, LockGuard, LossSignal};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::signals::Signals;
use crate::{exit, report};

/// How long the release after the child's exit may take before the tool
/// exits anyway (its session then ends, which frees the lock too).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a cancelled wait may take to leave the server's queue at exit.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the best-effort "who holds it" query may take after a conflict.
const HOLDERS_TIMEOUT: Duration = Duration::from_secs(3);

/// `HOSTNAME:PID`.
pub fn default_holder_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Runs `lock run`; returns the exit code.
pub async fn run(args: RunArgs, db: Database) -> i32 {
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            report!("cannot catch signals: {e}");
            return exit::SOFTWARE;
        }
    };
    let holder_id = args.holder_id.clone().unwrap_or_else(default_holder_id);
    let manager = db.manager_builder().holder_id(holder_id.clone()).build();
    let timeout = if args.no_wait {
        Some(Duration::ZERO)
    } else {
        args.timeout
    };
    tracing::info!(key = %args.key, ?timeout, %holder_id, "acquiring");

    let acquired = tokio::select! {
        result = manager.acquire(&args.key, timeout) => result,
        sig = signals.recv() => {
            // The acquisition future is dropped here; the manager then
            // cancels the wait on the server. Exiting at once would leave
            // the session queued there until the lock reached it.
            shut_down(&manager).await;
            report!(
                "{} while waiting for lock {:?}; the command was not run",
                sig.as_str(),
                args.key
            );
            return exit::SIGNAL_BASE + sig as i32;
        }
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(e) if e.is_timeout() => {
            let holders = tokio::time::timeout(HOLDERS_TIMEOUT, manager.holders(&[&args.key]))
                .await
                .ok()
                .and_then(Result::ok);
            report!(
                "{}",
                conflict_message(&args.key, timeout, holders.as_deref())
            );
            return args.conflict_exit_code;
        }
        // The error names the key already.
        Err(e) => return db::fail("", Some(&db), &e),
    };
    tracing::info!(key = %args.key, lock_id = guard.lock_id(), "acquired");
    if guard.is_lost() {
        report!(
            "lock {:?} was lost right after it was acquired; the command was not run",
            args.key
        );
        return args.lost_exit_code;
    }

    let mut child = match spawn_child(&args.command, &args.key, guard.lock_id()) {
        Ok(child) => child,
        Err(e) => {
            let program = args.command[0].to_string_lossy().into_owned();
            let code = if e.kind() == io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXECUTE
            };
            report!("cannot run {program:?}: {e}");
            release(guard, &args.key).await;
            return code;
        }
    };
    let Some(pid) = child.id().map(|id| Pid::from_raw(id as i32)) else {
        report!("the command exited before it could be supervised");
        release(guard, &args.key).await;
        return exit::SOFTWARE;
    };

    let supervised = supervise(
        &mut child,
        pid,
        &args.key,
        guard.loss_signal(),
        &mut signals,
        args.kill_grace,
    )
    .await;
    let (status, lost) = match supervised {
        Ok(done) => done,
        Err(e) => {
            report!("cannot wait for the command (pid {pid}): {e}");
            let _ = kill(pid, Signal::SIGKILL);
            return exit::SOFTWARE;
        }
    };
    let code = exit_code(status);

    if lost || guard.is_lost() {
        drop(guard);
        report!(
            "lock {:?} was lost while the command ran; the command {}; exiting with {}",
            args.key,
            describe_status(status),
            args.lost_exit_code
        );
        return args.lost_exit_code;
    }
    match tokio::time::timeout(RELEASE_TIMEOUT, guard.release()).await {
        Ok(Ok(())) => code,
        Ok(Err(e)) if e.is_lock_lost() => {
            report!(
                "the command {}, but lock {:?} was lost before it was released: \
                 exclusion is not guaranteed for its last moments; exiting with {}",
                describe_status(status),
                args.key,
                args.lost_exit_code
            );
            args.lost_exit_code
        }
        Ok(Err(e)) => {
            report!(
                "warning: releasing lock {:?} failed ({}); it is freed when this process exits",
                args.key,
                db::error_chain(&e)
            );
            code
        }
        Err(_) => {
            report!(
                "warning: releasing lock {:?} took longer than {}; it is freed when this process exits",
                args.key,
                format_duration(RELEASE_TIMEOUT)
            );
            code
        }
    }
}

/// Closes the manager and gives its sessions a bounded moment to finish
/// (a cancelled wait is taken out of the server's queue by a cancel request).
async fn shut_down(manager: &PostgresLockManager) {
    let _ = tokio::time::timeout(RELEASE_TIMEOUT, manager.close()).await;
    let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
    // No event tells when the last session has ended: poll, bounded.
    while manager.session_count() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Releases a lock whose command never ran, reporting failures only.
async fn release(guard: LockGuard, key: &str) {
    match tokio::time::timeout(RELEASE_TIMEOUT, guard.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report!(
            "warning: releasing lock {key:?} failed: {}",
            db::error_chain(&e)
        ),
        Err(_) => report!("warning: releasing lock {key:?} timed out"),
    }
}

/// Starts the command with the lock's key and id in its environment.
fn spawn_child(command: &[OsString], key: &str, lock_id: i64) -> io::Result<Child> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("EVENTSOURCE_LOCK_KEY", key)
        .env("EVENTSOURCE_LOCK_ID", lock_id.to_string())
        .kill_on_drop(false);
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getpid();
        // SAFETY: the hook runs in the forked child before exec. It makes
        // two async-signal-safe system calls (prctl, getppid), takes no
        // lock and allocates nothing.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || {
                // The lock lives in this process's database session: if this
                // process dies, so must the command.
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The parent may have died before the call took effect.
                if nix::unistd::getppid() != parent {
                    return Err(io::Error::from(nix::errno::Errno::ESRCH));
                }
                Ok(())
            });
        }
    }
    cmd.spawn()
}

/// Waits for the child, forwarding signals, stopping it if the lock is
/// lost. Returns its exit status and whether the lock was lost.
async fn supervise(
    child: &mut Child,
    pid: Pid,
    key: &str,
    loss: LossSignal,
    signals: &mut Signals,
    grace: Duration,
) -> io::Result<(ExitStatus, bool)> {
    let mut lost = false;
    let mut kill_at: Option<Instant> = None;
    loop {
        tokio::select! {
            status = child.wait() => return status.map(|s| (s, lost)),
            sig = signals.recv() => {
                if from_terminal(sig) {
                    tracing::info!(signal = sig.as_str(), "the terminal sent it to the command too");
                } else {
                    tracing::info!(signal = sig.as_str(), %pid, "forwarding signal to the command");
                    // The child is not reaped until `wait` returns, so `pid`
                    // still names it (at worst as a zombie).
                    let _ = kill(pid, sig);
                }
            }
            _ = loss.lost(), if !lost => {
                lost = true;
                if grace.is_zero() {
                    report!(
                        "lock {key:?} was lost (its database session ended); \
                         sending SIGKILL to the command (pid {pid})"
                    );
                    let _ = kill(pid, Signal::SIGKILL);
                } else {
                    report!(
                        "lock {key:?} was lost (its database session ended); \
                         sending SIGTERM to the command (pid {pid}), SIGKILL in {}",
                        format_duration(grace)
                    );
                    let _ = kill(pid, Signal::SIGTERM);
                    kill_at = Some(Instant::now() + grace);
                }
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                kill_at = None;
                report!(
                    "the command (pid {pid}) still runs {} after SIGTERM; sending SIGKILL",
                    format_duration(grace)
                );
                let _ = kill(pid, Signal::SIGKILL);
            }
        }
    }
}

/// True when `sig` is a terminal's Ctrl-C / Ctrl-\\ to the foreground
/// process group this tool (and so the command) belongs to: the terminal
/// delivered it to the command already, and a second copy could cut short
/// the command's own clean-up.
fn from_terminal(sig: Signal) -> bool {
    if !matches!(sig, Signal::SIGINT | Signal::SIGQUIT) {
        return false;
    }
    nix::unistd::tcgetpgrp(std::io::stdin()).is_ok_and(|fg| fg == nix::unistd::getpgrp())
}

/// The child's exit code, or 128+N when it died of signal N.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => exit::SIGNAL_BASE + sig,
        (None, None) => exit::SOFTWARE,
    }
}

/// "exited with code 3", "died of signal 15 (SIGTERM)".
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("died of signal {sig} ({})", s.as_str()),
            Err(_) => format!("died of signal {sig}"),
        },
        (None, None) => "ended".to_owned(),
    }
}

/// Names a session for messages: its holder id, else its application name.
pub fn session_name(s: &LockSession) -> String {
    match (&s.holder_id, &s.application_name) {
        (Some(id), _) => id.clone(),
        (None, Some(app)) if !app.is_empty() => format!("application {app:?}"),
        _ => "a session".to_owned(),
    }
}

/// The one-line "not acquired" message: key, id, and who holds it when visible.
pub fn conflict_message(
    key: &str,
    timeout: Option<Duration>,
    holders: Option<&[AdvisoryLock]>,
) -> String {
    let lock_id = eventsource::lock_id_for_key(key);
    let why = match timeout {
        Some(t) if t.is_zero() => "it is held elsewhere (--no-wait)".to_owned(),
        Some(t) => format!("still held elsewhere after {}", format_duration(t)),
        None => "it is held elsewhere".to_owned(),
    };
    let mut line = format!("lock {key:?} (id {lock_id}) not acquired: {why}");
    let lock = holders.and_then(|locks| locks.iter().find(|l| l.lock_id == lock_id));
    if let Some(lock) = lock {
        let who: Vec<String> = lock
            .holders
            .iter()
            .map(|h| {
                let mut details = vec![format!("pid {}", h.pid)];
                if let Some(addr) = &h.client_addr {
                    details.push(format!("client {addr}"));
                }
                if let Some(since) = h.since {
                    details.push(format!(
                        "active since {}",
                        since.format("%Y-%m-%dT%H:%M:%SZ")
                    ));
                }
                format!("{} ({})", session_name(h), details.join(", "))
            })
            .collect();
        if !who.is_empty() {
            line.push_str(&format!("; held by {}", who.join(" and ")));
        }
        if !lock.waiters.is_empty() {
            line.push_str(&format!("; {} waiting", lock.waiters.len()));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn session(pid: i32, app: Option<&str>, granted: bool) -> LockSession {
        LockSession {
            pid,
            mode: "ExclusiveLock".into(),
            granted,
            application_name: app.map(str::to_owned),
            holder_id: app
                .and_then(|a| a.strip_prefix("eventsource/"))
                .map(str::to_owned),
            client_addr: Some("10.1.2.3".into()),
            backend_start: None,
            since: Some(Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, 0).unwrap()),
        }
    }

    #[test]
    fn exit_codes_pass_through_and_map_signals() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
        assert_eq!(
            describe_status(ExitStatus::from_raw(15)),
            "died of signal 15 (SIGTERM)"
        );
        assert_eq!(
            describe_status(ExitStatus::from_raw(1 << 8)),
            "exited with code 1"
        );
    }

    #[test]
    fn conflict_message_names_key_and_holder() {
        let id = eventsource::lock_id_for_key("nightly");
        let locks = vec![AdvisoryLock {
            lock_id: id,
            key: Some("nightly".into()),
            holders: vec![session(4242, Some("eventsource/host-a:17"), true)],
            waiters: vec![session(4343, Some("psql"), false)],
        }];
        let line = conflict_message("nightly", Some(Duration::ZERO), Some(&locks));
        assert_eq!(
            line,
            format!(
                "lock \"nightly\" (id {id}) not acquired: it is held elsewhere (--no-wait); \
                 held by host-a:17 (pid 4242, client 10.1.2.3, active since 2026-11-30T09:00:00Z); \
                 1 waiting"
            )
        );
        let line = conflict_message("nightly", Some(Duration::from_secs(30)), None);
        assert!(line.ends_with("still held elsewhere after 30s"), "{line}");
        assert!(!line.contains('\n'));
    }
}
