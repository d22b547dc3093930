//! Leader election on the lock ports: [`Election`], [`Leadership`].
//!
//! An election is an exclusive lock on the key [`election_key`]`(name)`
//! taken by a fencing lock manager: the candidate holding it leads, the
//! others wait in the lock's fair queue, and the lock's fencing token is
//! the leader's **term**, strictly greater than every earlier term of the
//! same election. Whatever ends the lock ends the leadership: resigning
//! releases it, a crashed leader's session ends and the server frees its
//! lock (the next candidate in the queue leads within milliseconds), a
//! leader cut off from the server sees its loss signal fire.
//!
//! Who leads now, and a stream of changes that reports vacancies, are in
//! `election_watch.rs` (`Election::leader`, `Election::watch`).

use std::time::Duration;

use super::election_metrics::{self, TermGauge};
use crate::ports::error::{Error, Result};
use crate::ports::lock_id::MAX_KEY_LEN;
use crate::ports::locks::{DistributedLock, LockGuard, LockInfo};
use crate::ports::loss::LossSignal;

/// The prefix of every election's lock key.
pub const ELECTION_KEY_PREFIX: &str = "election:";

/// The lock key of the election `name`: `"election:" + name`. Its
/// advisory-lock id is [`lock_id_for_key`](crate::lock_id_for_key) of it,
/// so a service in another language takes part by locking the same id
/// (see `docs/primitives.md`).
///
/// ```
/// use pgcoord::coordination::election_key;
/// assert_eq!(election_key("billing-scheduler"), "election:billing-scheduler");
/// ```
pub fn election_key(name: &str) -> String {
    format!("{ELECTION_KEY_PREFIX}{name}")
}

/// An election on one name, over any lock manager of the ports.
///
/// The manager must hand out fencing tokens (the in-memory one does unless
/// built [`without_fencing`](crate::InMemoryLockManager::without_fencing);
/// build a `PostgresLockManager` with `.fencing(true)` and run
/// `install_fencing()` once per database): the token is the term.
/// [`Election::new`] refuses a manager whose
/// [`fences()`](DistributedLock::fences) is false, before anything waits.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use pgcoord::coordination::Election;
/// use pgcoord::InMemoryLockManager;
///
/// let locks = InMemoryLockManager::new(Some("node-1".into()));
/// let election = Election::new(locks.clone(), "scheduler")?;
/// let first = election.campaign(None).await?;
/// assert!(election.try_campaign().await?.is_none(), "one leader at a time");
/// let term = first.term();
/// first.resign().await?;
/// let second = election.campaign(None).await?;
/// assert!(second.term() > term, "terms only grow");
/// # Ok::<(), pgcoord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Election<L> {
    locks: L,
    name: String,
    key: String,
}

impl<L: DistributedLock> Election<L> {
    /// An election called `name` on `locks`. Performs no I/O; with the
    /// `metrics` feature, registers the election's gauges at 0
    /// (`eventsource_election_*`, see `docs/observability.md`).
    ///
    /// A manager that gives no fencing tokens
    /// ([`DistributedLock::fences`] is false) is an
    /// [`Error::InvalidArgument`]: its leaders would have no term. So is a
    /// name whose key ([`election_key`]) is longer than
    /// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes, which no campaign could
    /// lock.
    pub fn new(locks: L, name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if ELECTION_KEY_PREFIX.len() + name.len() > MAX_KEY_LEN {
            return Err(Error::InvalidArgument(format!(
                "an election name may be {} bytes long, not {}",
                MAX_KEY_LEN - ELECTION_KEY_PREFIX.len(),
                name.len()
            )));
        }
        if !locks.fences() {
            return Err(Error::InvalidArgument(format!(
                "election {name:?}: the lock manager gives no fencing tokens, so a leader \
                 would have no term; build it with fencing on (and install fencing)"
            )));
        }
        let key = election_key(&name);
        election_metrics::register(&name);
        Ok(Self { locks, name, key })
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock key it runs on ([`election_key`]).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The lock manager.
    pub fn locks(&self) -> &L {
        &self.locks
    }

    /// Waits to lead: up to `timeout` (`None`: as long as it takes;
    /// `Some(Duration::ZERO)`: one attempt). Candidates are served in the
    /// order they started waiting (the lock's fair queue). A timeout is the
    /// lock's timeout error ([`Error::is_timeout`]).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in tokio's sense: a dropped campaign loses its place
    /// in the queue. It leaks nothing: as the lock's `acquire`, a grant that
    /// raced the drop is given back, so nobody is left leading without a
    /// handle.
    pub async fn campaign(&self, timeout: Option<Duration>) -> Result<Leadership> {
        let guard = self.locks.acquire(&self.key, timeout).await?;
        self.lead(guard).await
    }

    /// Leads if nobody does, without waiting; `Ok(None)` when another
    /// candidate leads.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a leadership won by a dropped call is given back, so
    /// calling again finds the election as it was.
    pub async fn try_campaign(&self) -> Result<Option<Leadership>> {
        match self.locks.try_lock(&self.key).await? {
            Some(guard) => self.lead(guard).await.map(Some),
            None => Ok(None),
        }
    }

    async fn lead(&self, guard: LockGuard) -> Result<Leadership> {
        let Some(term) = guard.fence() else {
            guard.release().await?;
            return Err(Error::InvalidArgument(format!(
                "election {:?}: the lock manager gives no fencing tokens, so a leader \
                 would have no term; build it with fencing on (and install fencing)",
                self.name
            )));
        };
        Ok(Leadership {
            name: self.name.clone(),
            term,
            gauge: TermGauge::begin(&self.name, term),
            guard,
        })
    }
}

/// Leading an election: held until [`resign`](Self::resign), drop, or loss.
///
/// Dropping it resigns in the background.
#[must_use = "dropping the leadership resigns at once"]
#[derive(Debug)]
pub struct Leadership {
    name: String,
    term: u64,
    pub(super) gauge: TermGauge,
    guard: LockGuard,
}

impl Leadership {
    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This leader's term: the lock's fencing token, strictly greater than
    /// the term of every earlier leader of this election. Hand it to what
    /// the leader writes to, so a deposed leader's late writes can be
    /// refused (`fencing::check` for tables in the same database).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The underlying lock's info (key, lock id, since when, holder id).
    pub fn info(&self) -> &LockInfo {
        self.guard.info()
    }

    /// True once leadership is lost (the lock's session ended, failed its
    /// liveness check, or outlived its lease).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// A cloneable handle on the loss, e.g. for a task that stops the
    /// leader's work.
    pub fn loss_signal(&self) -> LossSignal {
        self.guard.loss_signal()
    }

    /// Resolves when leadership is lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing.
    pub async fn lost(&self) {
        self.guard.lost().await
    }

    /// Steps down and waits until the lock is released, so the next
    /// candidate can lead. Returns [`Error::LockLost`] when leadership had
    /// already been lost.
    ///
    /// # Cancel safety
    ///
    /// The leadership is consumed when this is called: dropped before it
    /// completes, the release still happens in the background; only its
    /// outcome is lost.
    pub async fn resign(self) -> Result<()> {
        self.gauge.end();
        self.guard.release().await
    }
}
