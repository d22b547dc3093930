//! [`InMemoryFeed`]: an append-only list of events as a projection feed, for
//! tests and examples.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::ports::error::Result;
use crate::ports::readmodels::{EventFeed, FeedSignal};

/// Events kept in memory, at positions 1, 2, 3, ...; appending raises the
/// feed's signal, so a runner tailing it wakes at once. Cheap to clone:
/// clones share the events.
///
/// ```
/// use pgcoord::readmodels::InMemoryFeed;
/// use pgcoord::readmodels::EventFeed;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> pgcoord::Result<()> {
/// let feed = InMemoryFeed::new();
/// assert_eq!(feed.append("placed"), 1);
/// assert_eq!(feed.append("shipped"), 2);
/// assert_eq!(feed.read_after(Some(1), 10).await?, vec![(2, "shipped")]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InMemoryFeed<E> {
    events: Arc<Mutex<Vec<E>>>,
    signal: FeedSignal,
}

impl<E> Clone for InMemoryFeed<E> {
    fn clone(&self) -> Self {
        Self {
            events: self.events.clone(),
            signal: self.signal.clone(),
        }
    }
}

impl<E> Default for InMemoryFeed<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> InMemoryFeed<E> {
    /// An empty feed.
    pub fn new() -> Self {
        Self {
            events: Arc::new(Mutex::new(Vec::new())),
            signal: FeedSignal::new(),
        }
    }

    /// Appends an event; returns its position.
    pub fn append(&self, event: E) -> i64 {
        let position = {
            let mut events = self.events();
            events.push(event);
            events.len() as i64
        };
        self.signal.notify();
        position
    }

    /// The number of events (the last position).
    pub fn len(&self) -> usize {
        self.events().len()
    }

    /// True before the first event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn events(&self) -> MutexGuard<'_, Vec<E>> {
        // A push cannot leave the list half-updated.
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<E: Clone + Send + Sync> EventFeed for InMemoryFeed<E> {
    type Event = E;

    /// Cancel safe: a copy of the events after `after`.
    async fn read_after(&self, after: Option<i64>, limit: usize) -> Result<Vec<(i64, E)>> {
        let from = after.unwrap_or(0).max(0) as usize;
        let events = self.events();
        Ok(events
            .iter()
            .enumerate()
            .skip(from)
            .take(limit)
            .map(|(i, e)| (i as i64 + 1, e.clone()))
            .collect())
    }

    fn signal(&self) -> Option<FeedSignal> {
        Some(self.signal.clone())
    }

    async fn head(&self) -> Result<Option<i64>> {
        let n = self.len() as i64;
        Ok((n > 0).then_some(n))
    }
}
