//! A session's request queue: any number of senders, one receiver (the
//! actor) that takes everything queued at once.
//!
//! Why not `tokio::sync::mpsc`: a batched session takes its requests a
//! whole batch at a time, and the channel's costs are per request. It
//! wakes the receiver on every send, and it stores requests in blocks of
//! 32 that it allocates as it goes; a block of requests is a few KB, an
//! allocation large enough that glibc first consolidates every small chunk
//! freed since the last one (measured: a few percent of a 1,024-task run's
//! client CPU in `malloc_consolidate` under `find_block`). Here a send is
//! a push under a mutex that is held for nothing else, the receiver is
//! woken only when it is waiting (once per batch, not once per request),
//! and the two sides swap their `Vec`s, so a steady load allocates nothing.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

/// The shared queue; senders hold it in an `Arc`, the receiver is a
/// [`Receiver`].
pub(super) struct Queue<T> {
    state: Mutex<State<T>>,
    /// Set once with `State::closed`, readable without the mutex.
    closed: AtomicBool,
}

struct State<T> {
    items: Vec<T>,
    /// The receiver, while it waits for an item.
    waker: Option<Waker>,
    closed: bool,
}

/// The receiving end. Dropping it closes the queue and drops whatever was
/// still queued (each request's reply sender with it, which tells its
/// caller that the session ended).
pub(super) struct Receiver<T> {
    queue: Arc<Queue<T>>,
}

/// A new queue and its receiver.
pub(super) fn queue<T>() -> (Arc<Queue<T>>, Receiver<T>) {
    let queue = Arc::new(Queue {
        state: Mutex::new(State {
            items: Vec::new(),
            waker: None,
            closed: false,
        }),
        closed: AtomicBool::new(false),
    });
    let receiver = Receiver {
        queue: queue.clone(),
    };
    (queue, receiver)
}

impl<T> Queue<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`, giving it back if the queue is closed.
    pub(super) fn send(&self, item: T) -> Result<(), T> {
        let waker = {
            let mut state = self.lock();
            if state.closed {
                return Err(item);
            }
            state.items.push(item);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Whether the receiver has closed the queue (or is gone).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the queue; returns what was queued, to be dropped or answered
    /// outside the mutex.
    fn close(&self) -> Vec<T> {
        let mut state = self.lock();
        state.closed = true;
        self.closed.store(true, Ordering::Release);
        state.waker = None;
        std::mem::take(&mut state.items)
    }
}

impl<T> Receiver<T> {
    /// Waits until something is queued, then moves all of it into `into`
    /// (empty when called; its capacity goes to the queue in exchange).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: items are taken only when it returns.
    pub(super) async fn take_all(&self, into: &mut Vec<T>) {
        debug_assert!(into.is_empty());
        poll_fn(|cx| {
            let mut state = self.queue.lock();
            if state.items.is_empty() {
                match &state.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => state.waker = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            }
            std::mem::swap(&mut state.items, into);
            Poll::Ready(())
        })
        .await
    }

    /// Closes the queue: later sends fail. Returns what was still queued.
    pub(super) fn close(&self) -> Vec<T> {
        self.queue.close()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        drop(self.queue.close());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::queue;

    #[tokio::test]
    async fn the_receiver_takes_everything_queued_in_order_and_is_woken_by_a_send() {
        let (q, rx) = queue::<u32>();
        q.send(1).unwrap();
        q.send(2).unwrap();
        let mut got = Vec::new();
        rx.take_all(&mut got).await;
        assert_eq!(got, [1, 2]);
        got.clear();
        let sender = {
            let q = q.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                q.send(3).unwrap();
            })
        };
        rx.take_all(&mut got).await;
        assert_eq!(got, [3]);
        sender.await.unwrap();
    }

    #[tokio::test]
    async fn a_take_dropped_while_waiting_loses_nothing_sent_after_it() {
        let (q, rx) = queue::<u32>();
        let mut got = Vec::new();
        {
            let take = rx.take_all(&mut got);
            tokio::pin!(take);
            // Waits (nothing queued), then is dropped, as in a `select!`
            // whose other branch won.
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            assert!(std::future::Future::poll(take.as_mut(), &mut cx).is_pending());
        }
        q.send(7).unwrap();
        rx.take_all(&mut got).await;
        assert_eq!(got, [7]);
    }

    #[test]
    fn a_closed_or_dropped_receiver_refuses_sends_and_drops_what_was_queued() {
        let (q, rx) = queue::<Arc<()>>();
        let item = Arc::new(());
        q.send(item.clone()).unwrap();
        assert!(!q.is_closed());
        let left = rx.close();
        assert_eq!(left.len(), 1);
        assert!(q.is_closed());
        assert!(q.send(item.clone()).is_err());
        drop(left);
        // Dropping the receiver drops what is queued: nothing keeps `item`.
        let (q, rx) = queue::<Arc<()>>();
        q.send(item.clone()).unwrap();
        drop(rx);
        assert!(q.is_closed());
        assert_eq!(Arc::strong_count(&item), 1);
    }
}
