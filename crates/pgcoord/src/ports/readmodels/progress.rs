//! How far a projection has got, for read-your-writes: a
//! [`ProjectionProgress`] follows a projection's committed checkpoint, fed
//! by its runner in this process or by the database's notifications.

use std::time::Duration;

use tokio::sync::watch;

use super::error::ReadModelError;
use crate::ports::error::Result;

/// Publishes a projection's committed checkpoint to its
/// [`ProjectionProgress`] views. For runners and adapters.
#[derive(Debug, Clone)]
pub struct CheckpointPublisher {
    tx: watch::Sender<Option<i64>>,
}

impl Default for CheckpointPublisher {
    fn default() -> Self {
        Self::new()
    }
}

impl CheckpointPublisher {
    /// A publisher that knows no checkpoint yet.
    pub fn new() -> Self {
        Self {
            tx: watch::Sender::new(None),
        }
    }

    /// Records a committed checkpoint; never moves the published one back.
    pub fn publish(&self, checkpoint: Option<i64>) {
        self.tx.send_if_modified(|current| {
            if checkpoint > *current {
                *current = checkpoint;
                true
            } else {
                false
            }
        });
    }

    /// Publishes `checkpoint` as the store holds it now, even below the
    /// one published: for a checkpoint read afresh (a run that starts, a
    /// watch that reads it on notice). A store's checkpoint moves back
    /// when a standby that had not received the last commits is promoted;
    /// from then on a waiter must not be told that those positions are
    /// applied, since the read model it reads no longer has them.
    pub fn publish_read(&self, checkpoint: Option<i64>) {
        self.tx.send_if_modified(|current| {
            let moved = *current != checkpoint;
            *current = checkpoint;
            moved
        });
    }

    /// A view of the published checkpoint.
    pub fn progress(&self) -> ProjectionProgress {
        ProjectionProgress {
            rx: self.tx.subscribe(),
        }
    }
}

/// A view of a projection's committed checkpoint, to wait for it to pass
/// a position (a request handler reading its own write). Woken by the
/// runner, never by polling. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ProjectionProgress {
    rx: watch::Receiver<Option<i64>>,
}

impl ProjectionProgress {
    /// The last committed checkpoint seen, `None` before any.
    pub fn checkpoint(&self) -> Option<i64> {
        *self.rx.borrow()
    }

    /// Returns the checkpoint once it is at or past `position` (at once
    /// when it already is). Fails with [`ReadModelError::NotCaughtUp`] when
    /// `timeout` (`None`: no limit) runs out first, or when nothing can
    /// publish any more (the runner and its publisher are gone).
    ///
    /// The checkpoint it compares with is the one last read from the
    /// store: after a failover that lost the last commits it is the new
    /// primary's, lower than before, and positions past it are waited for
    /// again.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a wait on a watch; dropped, nothing changes.
    pub async fn wait_for(&self, position: i64, timeout: Option<Duration>) -> Result<i64> {
        let mut rx = self.rx.clone();
        let not_yet = |reason: String| ReadModelError::NotCaughtUp {
            position,
            checkpoint: self.checkpoint(),
            reason,
        };
        let wait = async {
            match rx.wait_for(|c| c.is_some_and(|c| c >= position)).await {
                Ok(c) => Ok(c.expect("checked by the predicate")),
                Err(_) => Err(not_yet("nothing publishes it any more".into()).into()),
            }
        };
        match timeout {
            None => wait.await,
            Some(t) => match tokio::time::timeout(t, wait).await {
                Ok(done) => done,
                Err(_) => Err(not_yet(format!("timed out after {t:?}")).into()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CheckpointPublisher;

    #[test]
    fn a_checkpoint_read_afresh_may_move_back_a_reported_one_may_not() {
        let publisher = CheckpointPublisher::new();
        let progress = publisher.progress();
        publisher.publish(Some(103));
        publisher.publish(Some(90));
        assert_eq!(
            progress.checkpoint(),
            Some(103),
            "reports only move forward"
        );
        publisher.publish_read(Some(3));
        assert_eq!(
            progress.checkpoint(),
            Some(3),
            "the store's own, after a failover"
        );
        publisher.publish(Some(5));
        assert_eq!(progress.checkpoint(), Some(5));
    }
}
