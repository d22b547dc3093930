//! At most one run per interval ([`once_per`]), by the clock of the store
//! that records when each run started ([`RunLog`]), not by the clocks of
//! the hosts that run.
//!
//! "One at a time" is not "once per slot": the same cron line on several
//! hosts with skewed clocks starts the job at slightly different instants,
//! and a short job has finished on one host when another host starts it
//! again. [`once_per`] holds the key's lock and then asks the run log to
//! record this run's start, which it does only if no run of the key
//! started within the interval before, by the log's own clock (for
//! PostgreSQL, `clock_timestamp()` on the server: see
//! `adapters::postgres::PostgresRunLog`).
//!
//! The record is a port of its own, as [`LeaderObserver`](super::LeaderObserver)
//! is: the lock ports know nothing of time, so the adapters implement
//! [`RunLog`] in their own files (ports ← coordination ← adapters).

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::ports::error::Result;
use crate::ports::locks::{DistributedLock, LockGuard};

/// What the run log answered to a claim of a run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStart {
    /// No run started within the interval: this run's start is recorded
    /// at `at` (the log's clock).
    Recorded {
        /// This run's start, as recorded.
        at: DateTime<Utc>,
    },
    /// A run started within the interval: nothing was recorded, and this
    /// run must not happen.
    TooSoon {
        /// When the last run started (the latest of the keys claimed).
        last_started: DateTime<Utc>,
        /// The log's clock when it looked.
        now: DateTime<Utc>,
        /// The earliest start the log will accept: `last_started` plus
        /// the interval.
        next_at: DateTime<Utc>,
    },
}

/// Where each key's last run start is kept, by the store's own clock.
///
/// Implemented by `adapters::postgres::PostgresRunLog` (one row per key in
/// the fence table, `clock_timestamp()` of the server).
pub trait RunLog: Send + Sync {
    /// Records, as one atomic step, that a run of `keys` starts now (the
    /// store's clock), unless a run of any of them started less than
    /// `min_interval` before: then nothing is recorded and
    /// [`RunStart::TooSoon`] says when the last one started.
    ///
    /// Call it while holding the keys' locks, so that the run it records
    /// is the only one that can start; the step is atomic on its own too,
    /// so holders of different permits of one semaphore cannot both pass.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be leak-free when dropped; they are not cancel
    /// safe in tokio's sense when the record may already have been made
    /// (the start then counts although the caller never learnt of it).
    fn claim_start(
        &self,
        keys: &[&str],
        min_interval: Duration,
    ) -> impl Future<Output = Result<RunStart>> + Send;
}

/// What [`once_per`] came to.
#[derive(Debug)]
pub enum OncePer {
    /// Run now: the key is held and this run's start is recorded.
    Run {
        /// The key's lock; hold it while the run lasts.
        guard: LockGuard,
        /// This run's start, by the log's clock.
        started: DateTime<Utc>,
    },
    /// A run started within the interval; the lock was given back.
    TooSoon {
        /// When the last run started.
        last_started: DateTime<Utc>,
        /// The log's clock when it looked.
        now: DateTime<Utc>,
        /// The earliest start the log will accept.
        next_at: DateTime<Utc>,
    },
}

/// Acquires `key` (waiting up to `timeout`, as
/// [`DistributedLock::acquire`]), then records this run's start in `log`
/// unless a run of `key` started within `min_interval` before, by the
/// log's clock. The start is recorded before this returns, so a run that
/// crashes still counts.
///
/// ```no_run
/// # async fn job() {}
/// # async fn run(client: tokio_postgres::Client) -> pgcoord::Result<()> {
/// use std::time::Duration;
/// use pgcoord::{PostgresLockManager, postgres::PostgresRunLog};
/// use pgcoord::coordination::{once_per, OncePer};
///
/// let locks = PostgresLockManager::builder("postgres://app@db/app".parse()?).build()?;
/// let log = PostgresRunLog::new(&client); // needs `eventsource lock install` once
/// let hour = Duration::from_secs(3600);
/// match once_per(&locks, &log, "nightly-report", hour, Some(Duration::ZERO)).await? {
///     OncePer::Run { guard, .. } => {
///         job().await;
///         guard.release().await?;
///     }
///     OncePer::TooSoon { next_at, .. } => println!("already ran; next at {next_at}"),
/// }
/// # Ok(()) }
/// ```
///
/// Fails as [`DistributedLock::acquire`] does when the key is not
/// acquired, and with the log's error when it cannot record (the lock is
/// given back then).
///
/// # Cancel safety
///
/// Not cancel safe, but leak-free: dropped while waiting for the lock, it
/// loses its place in the queue as [`DistributedLock::acquire`] does;
/// dropped while the log records, the lock is released (the guard is
/// dropped), but the start may have been recorded, so the interval counts
/// from a run that did not happen.
pub async fn once_per<L, R>(
    locks: &L,
    log: &R,
    key: &str,
    min_interval: Duration,
    timeout: Option<Duration>,
) -> Result<OncePer>
where
    L: DistributedLock,
    R: RunLog,
{
    let guard = locks.acquire(key, timeout).await?;
    let claimed = log.claim_start(&[key], min_interval).await;
    match claimed {
        Ok(RunStart::Recorded { at }) => Ok(OncePer::Run { guard, started: at }),
        Ok(RunStart::TooSoon {
            last_started,
            now,
            next_at,
        }) => {
            guard.release().await?;
            Ok(OncePer::TooSoon {
                last_started,
                now,
                next_at,
            })
        }
        Err(e) => {
            // The claim's error says more than a failed release would.
            let _ = guard.release().await;
            Err(e)
        }
    }
}
