//! [`Alarm`]: a flag that is raised once and never lowered, which tasks
//! can look at without a lock and wait for.
//!
//! What a loss signal and a lock session's end are made of. It does what
//! `tokio_util`'s `CancellationToken` does for them, minus the tree: a
//! token's every look (`is_cancelled`), clone, drop and child takes the
//! mutex of its node, and every guard of a session used to clone that
//! session's token and hang a child under it, so the two worker threads
//! of a busy manager queued on one mutex several times per lock. Here a
//! look is one atomic load, sharing is an `Arc`, and only a waiter
//! registers with the [`Notify`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A one-way flag: lowered until [`raise`](Self::raise)d, then raised for good.
#[derive(Debug, Default)]
pub(crate) struct Alarm {
    raised: AtomicBool,
    notify: Notify,
}

impl Alarm {
    /// A lowered alarm, to be shared.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))] // raised by the PostgreSQL manager
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Raises the alarm and wakes every task waiting for it. Raising it
    /// again does nothing.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn raise(&self) {
        if !self.raised.swap(true, Ordering::AcqRel) {
            self.notify.notify_waiters();
        }
    }

    /// True once raised.
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// Resolves once the alarm is raised (at once if it already is).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing; a new one sees a
    /// raise that happened meanwhile.
    pub(crate) async fn raised(&self) {
        while !self.is_raised() {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the second look: a raise between the two
            // wakes this waiter (`notify_waiters` wakes only registered ones).
            notified.as_mut().enable();
            if self.is_raised() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_on_a_raise_and_a_late_one_returns_at_once() {
        let alarm = Alarm::new();
        assert!(!alarm.is_raised());
        let waiter = tokio::spawn({
            let alarm = alarm.clone();
            async move { alarm.raised().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        alarm.raise();
        alarm.raise();
        waiter.await.unwrap();
        assert!(alarm.is_raised());
        alarm.raised().await;
    }

    #[tokio::test]
    async fn a_dropped_wait_leaves_the_next_one_working() {
        let alarm = Alarm::new();
        {
            let wait = alarm.raised();
            tokio::pin!(wait);
            let polled = futures_util::FutureExt::now_or_never(wait.as_mut());
            assert!(polled.is_none());
        }
        alarm.raise();
        alarm.raised().await;
    }
}
