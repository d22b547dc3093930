//! The feed port: where a projection runner reads its events from, and how
//! it learns that there are new ones.

use std::future::Future;

use tokio::sync::watch;

use crate::ports::error::Result;

/// A source of positioned events for a projection runner.
///
/// Positions are positive and increase along the feed; gaps are allowed
/// (a rolled-back write leaves one). A feed must never return an event at a
/// position below one it has already returned for the same reader: the
/// runner's checkpoint moves past every position it is given, so an event
/// that turns up later below it would be skipped. A feed over a table
/// written by concurrent transactions has to wait for the transactions
/// that may still add lower positions (the PostgreSQL event table does).
///
/// ```
/// use pgcoord::readmodels::{EventFeed, FeedSignal};
///
/// struct Numbers { until: i64, signal: FeedSignal }
///
/// impl EventFeed for Numbers {
///     type Event = i64;
///     async fn read_after(&self, after: Option<i64>, limit: usize) -> pgcoord::Result<Vec<(i64, i64)>> {
///         let from = after.unwrap_or(0) + 1;
///         Ok((from..=self.until).take(limit).map(|p| (p, p * 10)).collect())
///     }
///     fn signal(&self) -> Option<FeedSignal> {
///         Some(self.signal.clone())
///     }
/// }
/// ```
pub trait EventFeed: Send + Sync {
    /// The event type handed to the projection's handler.
    type Event: Send + Sync;

    /// Up to `limit` events with positions greater than `after` (`None`:
    /// from the start), in position order. An empty answer means "nothing
    /// new yet".
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe (a read): dropped, nothing was
    /// consumed, and calling again returns the same events.
    fn read_after(
        &self,
        after: Option<i64>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<(i64, Self::Event)>>> + Send;

    /// The event at `position`, one this feed has handed out before (so it
    /// is committed); `None` when the feed has no event there (any more).
    /// A replay of a parked event reads it again this way.
    ///
    /// The default reads [`read_after`](Self::read_after)`(position - 1, 1)`.
    /// A feed that holds positions back while earlier writes may still
    /// commit (the PostgreSQL event table does, for as long as any older
    /// transaction runs) answers with a read at the position instead: an
    /// event already handed out is final, and its replay must not wait for
    /// unrelated transactions.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe (a read).
    fn read_at(&self, position: i64) -> impl Future<Output = Result<Option<Self::Event>>> + Send {
        async move {
            let read = self.read_after(Some(position - 1), 1).await?;
            Ok(read
                .into_iter()
                .find(|(p, _)| *p == position)
                .map(|(_, event)| event))
        }
    }

    /// The signal raised when new events may be there, if the feed has one.
    /// Without one the runner reads again after its idle interval.
    fn signal(&self) -> Option<FeedSignal> {
        None
    }

    /// The highest position of the feed, when the feed knows it (for lag).
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe (a read).
    fn head(&self) -> impl Future<Output = Result<Option<i64>>> + Send {
        std::future::ready(Ok(None))
    }
}

/// "New events may be there": a wake-up that is never lost.
///
/// Writers (or a PostgreSQL `LISTEN` task) call [`notify`](Self::notify);
/// each reader holds a [`FeedWakeup`] from [`subscribe`](Self::subscribe)
/// and awaits [`FeedWakeup::changed`]. A notification that comes between
/// a reader's last read and its wait is kept (the signal counts
/// notifications, the wake-up remembers the count it has seen), so a
/// runner never sleeps through one; several notifications in a row wake a
/// reader once. Cheap to clone: clones share the signal.
#[derive(Debug, Clone)]
pub struct FeedSignal {
    tx: watch::Sender<u64>,
}

impl Default for FeedSignal {
    fn default() -> Self {
        Self::new()
    }
}

impl FeedSignal {
    /// A new signal nobody listens to yet.
    pub fn new() -> Self {
        Self {
            tx: watch::Sender::new(0),
        }
    }

    /// Wakes every reader (now, or at its next wait).
    pub fn notify(&self) {
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A wake-up that sees the notifications made from now on.
    pub fn subscribe(&self) -> FeedWakeup {
        FeedWakeup {
            rx: self.tx.subscribe(),
        }
    }
}

/// One reader's view of a [`FeedSignal`].
#[derive(Debug)]
pub struct FeedWakeup {
    rx: watch::Receiver<u64>,
}

impl FeedWakeup {
    /// Resolves at the first notification this wake-up has not seen yet
    /// (at once when one came since the last call, or since
    /// [`FeedSignal::subscribe`]). Never resolves once every signal clone
    /// is gone.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a notification is only marked seen when this resolves.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
