//! Leaders that run work: [`Election::run_while_leading`] and the
//! [`LeaderTerm`] it hands to the work.
//!
//! The loop users of client-go (`OnStartedLeading`), etcd (`Campaign`) and
//! kube-rs lease loops write by hand: campaign, run the leader's work with
//! a token that is cancelled when leadership is lost, resign when the work
//! returns, campaign again, until the caller says stop.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::election::{Election, Leadership};
use crate::ports::error::Result;
use crate::ports::locks::{DistributedLock, LockInfo};

/// One term of leadership, handed to the work of
/// [`Election::run_while_leading`].
#[derive(Debug, Clone)]
pub struct LeaderTerm {
    term: u64,
    info: LockInfo,
    stop: CancellationToken,
}

impl LeaderTerm {
    /// The term: the lock's fencing token, strictly greater than every
    /// earlier term of the election (as [`Leadership::term`]). Check it
    /// inside each protected transaction (`fencing::check_token`), so a
    /// write the work sends after it was deposed is refused.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The election lock's info (key, lock id, holder id, the fencing
    /// token, which is the term): what `fencing::check` takes.
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// A token cancelled when this term ends: the leadership was lost (its
    /// session ended, failed its liveness check or outlived its lease), or
    /// the caller's `stop` token was cancelled. The work should return soon
    /// after; the loop waits for it before it resigns. Also cancelled once
    /// the work has returned and the leadership is resigned, so a clone
    /// kept by a task the work spawned sees the end too.
    pub fn token(&self) -> &CancellationToken {
        &self.stop
    }

    /// Whether the term has ended (as [`token`](Self::token)`.is_cancelled()`).
    pub fn is_over(&self) -> bool {
        self.stop.is_cancelled()
    }
}

impl<L: DistributedLock> Election<L> {
    /// Leads and runs `work`, again and again, until `stop` is cancelled.
    ///
    /// Each round campaigns (waiting in the election's fair queue as long
    /// as it takes), then calls `work` with a [`LeaderTerm`]: its term and
    /// a token cancelled when the leadership is lost or `stop` is
    /// cancelled. When `work` returns, the leadership is resigned (a lost
    /// one has nothing to give back) and the next round campaigns again, so
    /// a work that returns at once hands the election to the next candidate
    /// in line. The work is never cut off: a lost leadership cancels its
    /// token and the loop waits for it to return; write what it protects
    /// under the term (`fencing::check_token(&tx, term.info().key, term.term())`
    /// inside the transaction), so that a late write is refused even before
    /// the work has noticed.
    ///
    /// Returns `Ok(())` once `stop` is cancelled (while campaigning: at
    /// once; while leading: when the work has returned and the leadership
    /// is resigned). A campaign or a resign that fails with anything but a
    /// lost leadership (the database unreachable, say) ends the loop with
    /// that error; call it again to go on. A manager without fencing tokens
    /// is not among those failures: [`Election::new`] refuses it.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use pgcoord::coordination::Election;
    /// use pgcoord::InMemoryLockManager;
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let election = Election::new(InMemoryLockManager::new(None), "scheduler")?;
    /// let stop = CancellationToken::new();
    /// let mut terms = Vec::new();
    /// election
    ///     .run_while_leading(&stop, |term| {
    ///         terms.push(term.term());
    ///         if terms.len() == 3 {
    ///             stop.cancel(); // the third term is the last one
    ///         }
    ///         async move {
    ///             // ... the leader's work, until it is done or
    ///             // `term.token()` is cancelled ...
    ///         }
    ///     })
    ///     .await?;
    /// assert!(terms.windows(2).all(|w| w[0] < w[1]), "each round is a new term");
    /// assert!(election.try_campaign().await?.is_some(), "resigned at the end");
    /// # Ok::<(), pgcoord::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in tokio's sense: dropped while campaigning, it
    /// loses its place in the queue; dropped while leading, the work's
    /// future is dropped where it stands. It leaks nothing: the leadership
    /// is resigned in the background (as dropping a [`Leadership`]), and a
    /// campaign's grant that raced the drop is given back. To stop the work
    /// at a point of its own choosing, cancel `stop` instead.
    pub async fn run_while_leading<F, Fut>(
        &self,
        stop: &CancellationToken,
        mut work: F,
    ) -> Result<()>
    where
        F: FnMut(LeaderTerm) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            let leading = tokio::select! {
                biased;
                () = stop.cancelled() => return Ok(()),
                leading = self.campaign(None) => leading?,
            };
            if stop.is_cancelled() {
                return resign(leading).await;
            }
            let term = LeaderTerm {
                term: leading.term(),
                info: leading.info().clone(),
                stop: stop.child_token(),
            };
            let ends = term.stop.clone();
            lead_until_done(&leading, &ends, work(term)).await;
            let resigned = resign(leading).await;
            ends.cancel(); // the term is over
            resigned?;
            if stop.is_cancelled() {
                return Ok(());
            }
        }
    }
}

/// Runs the work to its end, cancelling its token as soon as the
/// leadership is lost (a `stop` cancels it as its parent).
async fn lead_until_done(
    leading: &Leadership,
    ends: &CancellationToken,
    work: impl Future<Output = ()>,
) {
    let mut work = std::pin::pin!(work);
    let mut lost = std::pin::pin!(leading.lost());
    let mut told = false;
    loop {
        tokio::select! {
            () = &mut work => return,
            () = &mut lost, if !told => {
                told = true;
                leading.gauge.end();
                ends.cancel();
            }
        }
    }
}

/// Resigns; a leadership already lost has nothing left to give back.
async fn resign(leading: Leadership) -> Result<()> {
    match leading.resign().await {
        Err(e) if e.is_lock_lost() => Ok(()),
        other => other,
    }
}
