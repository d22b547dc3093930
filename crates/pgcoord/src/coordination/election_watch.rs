//! Who leads an election now ([`LeaderObserver`], [`Election::leader`]),
//! and a stream of changes that reports vacancies ([`Election::watch`]).
//!
//! Observing needs more than the lock ports (they only know what their own
//! manager holds), so it is a trait of its own, implemented for the
//! adapters in their own `leader_observer.rs` (the in-memory manager's, and
//! `PostgresLockManager`'s, which reads `pg_locks`, seeing every process).

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::Stream;

use super::election::Election;
use crate::ports::error::Result;
use crate::ports::locks::DistributedLock;

/// The leader of an election, as an observer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The leader's holder id (its manager's `holder_id`), when known.
    pub holder_id: Option<String>,
    /// The server process id of the leader's session (PostgreSQL).
    pub pid: Option<i32>,
    /// When the leader's session was last active, or connected (PostgreSQL
    /// does not record when a lock was granted).
    pub since: Option<DateTime<Utc>>,
    /// The leader's term, when the observer can read it: in memory, and
    /// for a fencing `PostgresLockManager` from its fence table; `None`
    /// for a manager that does not fence.
    pub term: Option<u64>,
}

impl Leader {
    /// Whether two observations are of the same leadership (`since` aside,
    /// which moves while a session works).
    fn same_as(&self, other: &Leader) -> bool {
        self.holder_id == other.holder_id && self.pid == other.pid && self.term == other.term
    }
}

/// A lock manager that can tell who holds a key, in every process it can see.
pub trait LeaderObserver: Send + Sync {
    /// The holder of `key` now, `None` when nobody holds it.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe (a read).
    fn leader_of(&self, key: &str) -> impl Future<Output = Result<Option<Leader>>> + Send;
}

impl<L: DistributedLock + LeaderObserver> Election<L> {
    /// Who leads now; `None` while the election is vacant.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        self.locks().leader_of(self.key()).await
    }

    /// A stream of who leads: the current state first, then every change
    /// seen when looking again every `every` (a new leader, or `None`:
    /// vacant). Changes shorter than `every` can be missed: the server does
    /// not announce lock hand-overs, so this looks; a leader's own code
    /// should rely on its [`Leadership`](super::Leadership) loss signal
    /// instead. An error is yielded and the stream goes on looking.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use pgcoord::futures_util::StreamExt;
    /// use pgcoord::coordination::Election;
    /// use pgcoord::InMemoryLockManager;
    ///
    /// let election = Election::new(InMemoryLockManager::new(None), "scheduler")?;
    /// let mut changes = Box::pin(election.watch(Duration::from_millis(10)));
    /// assert_eq!(changes.next().await.unwrap()?, None); // vacant
    /// let leading = election.campaign(None).await?;
    /// assert_eq!(changes.next().await.unwrap()?.unwrap().term, Some(leading.term()));
    /// leading.resign().await?;
    /// assert_eq!(changes.next().await.unwrap()?, None); // vacant again
    /// # Ok::<(), pgcoord::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping a `next()` loses at most that one look.
    pub fn watch(&self, every: Duration) -> impl Stream<Item = Result<Option<Leader>>> + Send + '_ {
        struct State {
            last: Option<Option<Leader>>,
            first: bool,
        }
        let every = every.max(Duration::from_millis(1));
        let start = State {
            last: None,
            first: true,
        };
        futures_util::stream::unfold(start, move |mut state| async move {
            loop {
                if !state.first {
                    tokio::time::sleep(every).await;
                }
                state.first = false;
                match self.leader().await {
                    Err(e) => return Some((Err(e), state)),
                    Ok(now) => {
                        let changed = match (&state.last, &now) {
                            (None, _) => true,
                            (Some(Some(a)), Some(b)) => !a.same_as(b),
                            (Some(a), b) => a.is_some() != b.is_some(),
                        };
                        if changed {
                            state.last = Some(now.clone());
                            return Some((Ok(now), state));
                        }
                    }
                }
            }
        })
    }
}
