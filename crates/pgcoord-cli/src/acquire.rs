//! Acquiring the lock (or, with `--also`, the set of locks) for `lock run`:
//! the attempt, the retries while `--timeout` lasts, and the one line that
//! says why it was not acquired.

use std::time::Duration;

use pgcoord::coordination::acquire_many;
use pgcoord::PostgresLockManager;
use pgcoord::{error::BackendErrorKind, DistributedLock, Error, SharedLock};
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::db::{self, Database};
use crate::duration::format_duration;
use crate::held::Held;
use crate::not_acquired::{gave_up, not_acquired, ANSWER_FLOOR};
use crate::signals::Signals;
use crate::{exit, report};

/// How late a backstop must fire for the tool to count as stopped meanwhile.
const STOPPED_AT_LEAST: Duration = Duration::from_millis(10);
/// How many times one attempt's backstop gives the engine more time after
/// the tool was stopped.
const MAX_STOPS: u32 = 3;
/// The last look of every backstop for an outcome already on its way.
const LAST_LOOK: Duration = Duration::from_millis(50);
/// How long a shutdown may take to close the manager.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a cancelled wait may take to leave the server's queue at exit.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// How much longer than its timeout an acquisition may take before the
/// tool concludes that the server did not answer.
const ANSWER_GRACE: Duration = Duration::from_secs(1);
/// Backoff between connection attempts while `--timeout` lasts.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// `HOSTNAME:PID`.
pub fn default_holder_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// What the acquisition came to.
pub enum Acquired {
    Held(PostgresLockManager, Held),
    /// The tool's exit code.
    Exit(i32),
}

/// True for a connection failure worth retrying while the timeout lasts:
/// no answer, refused, a server starting up / out of connection slots, or
/// a PgBouncer at its `max_client_conn` (08P01 with its words: the code
/// also covers what no wait mends); not a wrong password, a missing
/// database or a TLS failure. Or a session that ended while it tried or
/// waited (a restart, a failover: nothing was taken and nothing run, and
/// the next session may land on the new primary). A session the engine
/// gave up for silence before `--timeout` ran out (`time_left`) is retried
/// too: only a server silent past the timeout is one that did not answer.
fn worth_retrying(e: &Error, time_left: bool) -> bool {
    let Some(backend) = e.as_backend() else {
        return false;
    };
    // No wait gives this process more file descriptors.
    if crate::os_limits::out_of_descriptors(e) {
        return false;
    }
    let pooler_full =
        |c: &str| c == "08P01" && backend.message().contains("no more connections allowed");
    match backend.kind() {
        BackendErrorKind::NoAnswer => time_left,
        BackendErrorKind::Connect => backend.code().is_none_or(|c| {
            matches!(c.code(), "57P03" | "53300" | "57P01") || pooler_full(c.code())
        }),
        BackendErrorKind::Closed => true,
        // Within --timeout a standby may be promoted (a failover under
        // way, the URL naming the standby first or alone).
        BackendErrorKind::Standby => true,
        _ => false,
    }
}

/// A connection attempt that got no answer at all (no SQLSTATE).
fn is_unanswered_connect(e: &Error) -> bool {
    e.as_backend()
        .is_some_and(|b| b.kind() == BackendErrorKind::Connect && b.code().is_none())
}

/// One acquisition attempt's outcome.
enum Attempt {
    Done(Result<Held, Error>),
    /// The engine did not return by the backstop.
    Silent,
    /// A signal ended the wait (the manager was shut down).
    Signal(nix::sys::signal::Signal),
}

/// One acquisition (of KEY, a permit of semaphore KEY, or the set of
/// `keys`), bounded by a backstop for an engine that would not return in
/// time, and ended by a caught signal.
async fn attempt(
    manager: &PostgresLockManager,
    args: &RunArgs,
    keys: &[&str],
    timeout: Option<Duration>,
    backstop: Option<Duration>,
    signals: &mut Signals,
) -> Attempt {
    let acquiring = async {
        if crate::multi::is_set(args) {
            return acquire_many(manager, keys, timeout).await.map(Held::Set);
        }
        match args.permits {
            Some(n) => crate::permits::acquire(manager, &args.key, n, timeout).await,
            None if args.shared => manager.acquire_shared(&args.key, timeout).await,
            None => manager.acquire(&args.key, timeout).await,
        }
        .map(Held::One)
    };
    let bounded = async {
        match backstop {
            Some(b) => while_running(b, acquiring).await,
            None => Some(acquiring.await),
        }
    };
    tokio::select! {
        result = bounded => result.map_or(Attempt::Silent, Attempt::Done),
        sig = signals.recv() => {
            // The acquisition future is dropped here; the manager then
            // cancels the wait on the server. Exiting at once would leave
            // the session queued there until the lock reached it.
            shut_down(manager).await;
            Attempt::Signal(sig)
        }
    }
}

/// `work`'s outcome, unless it has none `limit` from now. A limit that
/// passes while the tool is stopped (Ctrl-Z, SIGSTOP, a debugger) fires
/// late, in the same turn that delivers what the server answered
/// meanwhile (a grant, or the end of the wait at `--timeout`): the engine
/// then gets [`ANSWER_GRACE`] more to hand it over. A tool that ran again
/// just before the limit may not have read that answer yet either: every
/// limit takes a [`LAST_LOOK`] first. So a stopped tool is never reported
/// as a server that did not answer.
async fn while_running<F: std::future::Future>(limit: Duration, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    let Some(mut at) = Instant::now().checked_add(limit) else {
        return Some(work.await);
    };
    let mut stops = MAX_STOPS;
    let mut last_look = true;
    loop {
        tokio::select! {
            biased;
            out = &mut work => return Some(out),
            () = tokio::time::sleep_until(at) => {}
        }
        let now = Instant::now();
        if now.saturating_duration_since(at) >= STOPPED_AT_LEAST && stops > 0 {
            stops -= 1;
            at = now + ANSWER_GRACE;
        } else if last_look {
            last_look = false;
            at = now + LAST_LOOK;
        } else {
            return None;
        }
    }
}

/// How many hosts the settings list (tried in turn when connecting).
fn host_count(db: &Database) -> u32 {
    let c = db.options.config();
    c.get_hosts().len().max(c.get_hostaddrs().len()).max(1) as u32
}

/// How long one attempt may go without an outcome before the tool says the
/// server did not answer. With a timeout: the timeout (at least
/// [`ANSWER_FLOOR`]) and a grace. Without one (`--no-wait`): the time to
/// connect to each of the URL's hosts in turn (a frozen first host takes
/// its whole `connect_timeout` before the next is tried), then
/// [`ANSWER_FLOOR`] for the answer, and the grace.
fn backstop(timeout: Option<Duration>, db: &Database) -> Option<Duration> {
    match timeout {
        Some(t) if t.is_zero() => {
            Some(db.connect_timeout() * host_count(db) + ANSWER_FLOOR + ANSWER_GRACE)
        }
        Some(t) => Some(t.max(ANSWER_FLOOR) + ANSWER_GRACE),
        None => None,
    }
}

/// Acquires the lock, retrying the connection with backoff while
/// `--timeout` lasts; reports every failure and returns its exit code.
pub async fn acquire(args: &RunArgs, db: &Database, signals: &mut Signals) -> Acquired {
    let holder_id = args.holder_id.clone().unwrap_or_else(default_holder_id);
    let keys = crate::multi::keys(args);
    let what = crate::multi::describe(&keys);
    let set = crate::multi::is_set(args);
    let timeout = if args.no_wait {
        Some(Duration::ZERO)
    } else {
        args.timeout
    };
    let deadline = args.timeout.map(|t| Instant::now() + t);
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let hosts = host_count(db);
    let mut backoff = RETRY_FIRST;
    // The last connection failure retried, reported if time runs out.
    let mut retried: Option<Error> = None;
    loop {
        let mut builder = db
            .manager_builder()
            .holder_id(holder_id.clone())
            .allow_standby(args.allow_standby)
            .fencing(args.fence);
        if let Some(lease) = args.lease {
            builder = builder.lease(lease);
        }
        // Whether this try's connect was cut short of `connect_timeout`.
        let mut cut = false;
        if let Some(l) = left() {
            // A retry connects within what is left of --timeout. The
            // engine gives an attempt at least [`ANSWER_FLOOR`] to connect
            // (so that a deadline shorter than a connect still works on
            // the first try): a URL's `connect_timeout` would otherwise
            // run the last retry past --timeout by up to that floor.
            // With several hosts, tried in turn, each gets its share (at
            // least the floor), the first try's too: a silent first host
            // would otherwise spend all of --timeout, and a promoted
            // standby listed after it would never be tried.
            let share = match hosts {
                1 => l,
                n => (l / n).max(ANSWER_FLOOR.min(l)),
            };
            if retried.is_some() || hosts > 1 {
                cut = retried.is_some() && share < db.connect_timeout();
                let within = db
                    .connect_timeout()
                    .min(share)
                    .max(Duration::from_millis(1));
                builder = builder.connect_timeout(within);
            }
        }
        if set {
            // The set's tries go out together on one batched session; each
            // key it has to wait for is waited for, and then held, on a
            // session of its own.
            builder = builder.batched_sessions(1);
        }
        let manager = builder
            // One lock per run: one session for the try, the wait and the
            // "who holds it" query. A permit's wait holds the semaphore's
            // turnstile while it looks at the slots: two locks.
            .single_session(args.permits.is_none() && !set)
            .build();
        let manager = match manager {
            Ok(m) => m,
            Err(e) => return Acquired::Exit(db::fail("cannot lock", Some(db), &e)),
        };
        // The last try of a run whose connection kept failing may have
        // next to nothing left: the engine still gives its first attempt
        // [`ANSWER_FLOOR`] to be answered.
        let this_try = match (timeout, left()) {
            (Some(t), _) if t.is_zero() => Some(Duration::ZERO),
            (_, Some(l)) => Some(l.max(Duration::from_millis(1))),
            (t, None) => t,
        };
        tracing::info!(keys = ?keys, timeout = ?this_try, %holder_id, "acquiring");
        let bound = backstop(this_try, db);
        let e = match attempt(&manager, args, &keys, this_try, bound, signals).await {
            Attempt::Done(Ok(guard)) => {
                if retried.is_some() {
                    // The last line said "retrying": say how it ended.
                    report!("{what} acquired after retrying (database {})", db.shown());
                }
                return Acquired::Held(manager, guard);
            }
            // Messages give the run's --timeout, not what was left of it
            // for this try ("(timeout 999ms)" for `--timeout 1s`).
            Attempt::Done(Err(Error::LockAcquisition(mut a))) => {
                if a.timeout.is_some_and(|t| !t.is_zero()) && timeout.is_some() {
                    a.timeout = timeout;
                }
                Error::LockAcquisition(a)
            }
            Attempt::Done(Err(e)) => e,
            Attempt::Silent if retried.is_none() => {
                let waited = bound.unwrap_or(db::CONNECT_TIMEOUT);
                report!(
                    "{what} not acquired: the server did not answer within {} \
                     (database {}); the command was not run",
                    format_duration(waited),
                    db.shown()
                );
                return Acquired::Exit(exit::UNAVAILABLE);
            }
            Attempt::Silent => return Acquired::Exit(gave_up(args, &what, db, retried.as_ref())),
            Attempt::Signal(sig) => {
                report!(
                    "{} while waiting for {what}; the command was not run",
                    sig.as_str()
                );
                return Acquired::Exit(exit::SIGNAL_BASE + sig as i32);
            }
        };
        // A set's failure to connect is the set's, not one key's.
        let e = if set {
            crate::multi::unattributed(e)
        } else {
            e
        };
        if !worth_retrying(&e, left().is_some_and(|l| !l.is_zero())) {
            let timed_out = e
                .as_backend()
                .is_some_and(|b| b.kind() == BackendErrorKind::NoAnswer);
            if timed_out && retried.is_some() {
                // The last try ran out of time; the earlier failures say why.
                return Acquired::Exit(gave_up(args, &what, db, retried.as_ref()));
            }
            return Acquired::Exit(not_acquired(args, &keys, db, &manager, timeout, &e).await);
        }
        let mut pause = backoff;
        backoff = (backoff * 2).min(RETRY_MAX);
        match left() {
            // Time for another try: after the pause, or at the very end of
            // the timeout when less than a pause is left (the whole
            // `--timeout` is used, not only whole pauses of it).
            Some(l) if !l.is_zero() => {
                pause = pause.min(l);
                if retried.is_none() {
                    let failure = match crate::not_acquired::is_standby(&e) {
                        true => format!(
                            "{what} not acquired yet: {}",
                            crate::not_acquired::standby_refused(args, db)
                        ),
                        false => {
                            db::describe_failure(&crate::multi::failed(&what, &e), Some(db), &e)
                        }
                    };
                    report!(
                        "{failure}; retrying until --timeout runs out ({} left)",
                        format_duration(l)
                    );
                }
                retried = Some(e);
            }
            // A connect cut short that got no answer ("no answer within
            // 1ms") says less than the try before it.
            Some(_) if cut && is_unanswered_connect(&e) => {
                return Acquired::Exit(gave_up(args, &what, db, retried.as_ref()));
            }
            Some(_) => return Acquired::Exit(gave_up(args, &what, db, Some(&e))),
            None => {
                let code = not_acquired(args, &keys, db, &manager, timeout, &e).await;
                return Acquired::Exit(code);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            sig = signals.recv() => {
                report!(
                    "{} while waiting for the database; the command was not run",
                    sig.as_str()
                );
                return Acquired::Exit(exit::SIGNAL_BASE + sig as i32);
            }
        }
    }
}

/// Closes the manager and gives its sessions a bounded moment to finish
/// (a cancelled wait is taken out of the server's queue by a cancel request).
async fn shut_down(manager: &PostgresLockManager) {
    close_within(manager, CLOSE_TIMEOUT, SHUTDOWN_TIMEOUT).await;
}

/// Closes the manager (for up to `close`), then waits up to `sessions`
/// more for every session to finish its step and end.
pub async fn close_within(manager: &PostgresLockManager, close: Duration, sessions: Duration) {
    let _ = tokio::time::timeout(close, manager.close()).await;
    let deadline = Instant::now() + sessions;
    // No event tells when the last session has ended: poll, bounded.
    while manager.session_count() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
#[path = "acquire_tests.rs"]
mod tests;
