//! [`Worker`]: the thread that owns a [`SqliteDatabase`](super::SqliteDatabase)'s
//! connection and runs its calls, in the order they were queued.
//!
//! Every call crosses to this thread over a channel and its result comes
//! back on a oneshot, so no file I/O and no wait for SQLite's lock ever
//! runs on a runtime worker; one thread per database costs a wake-up per
//! call where tokio's blocking pool cost a task hand-off. The queue is
//! first in, first out: what was queued before a statement runs before it,
//! which is what lets a dropped transaction queue its `ROLLBACK` ahead of
//! everything that comes after it.
//!
//! The thread ends when the last [`Worker`] handle (the database's last
//! clone) drops: the queue's receiver then sees the channel closed, runs
//! nothing more, and drops the connection. A panic in a call is caught on
//! the thread and comes back as an error of that call; the thread goes on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The name of every database's thread.
pub(super) const THREAD_NAME: &str = "eventsource-sqlite";

/// The sending end of one database's queue (its thread holds the other).
pub(super) struct Worker {
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    /// Starts the thread and opens the connection on it with `open`.
    pub(super) async fn start<F>(open: F) -> Result<Self>
    where
        F: FnOnce() -> Result<Connection> + Send + 'static,
    {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, ready) = oneshot::channel::<Result<()>>();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let mut conn = match catch_unwind(AssertUnwindSafe(open))
                    .unwrap_or_else(|p| Err(panicked(&*p)))
                {
                    Ok(conn) => conn,
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                if opened.send(Ok(())).is_err() {
                    return; // the open was dropped
                }
                while let Ok(job) = queue.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| backend(format!("cannot start the SQLite thread: {e}")))?;
        ready.await.map_err(|_| stopped())??;
        Ok(Self { jobs })
    }

    /// Queues `f`; its result (or its panic, as an error) comes back on the
    /// returned receiver, to be awaited with [`outcome`].
    pub(super) fn submit<T, F>(&self, f: F) -> Result<oneshot::Receiver<Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let (reply, receiver) = oneshot::channel();
        self.queue(move |c| {
            let out =
                catch_unwind(AssertUnwindSafe(|| f(c))).unwrap_or_else(|p| Err(panicked(&*p)));
            let _ = reply.send(out);
        })?;
        Ok(receiver)
    }

    /// Queues `f` and waits for its result.
    pub(super) async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        outcome(self.submit(f)?).await
    }

    /// Queues `f` without waiting for it (a panic in it is caught and
    /// logged).
    pub(super) fn queue<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce(&mut Connection) + Send + 'static,
    {
        let job: Job = Box::new(move |c| {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(c))) {
                tracing::warn!(error = %panicked(&*p), "a queued SQLite call panicked");
            }
        });
        self.jobs.send(job).map_err(|_| stopped())
    }
}

/// The result of a call queued with [`Worker::submit`].
pub(super) async fn outcome<T>(receiver: oneshot::Receiver<Result<T>>) -> Result<T> {
    receiver.await.map_err(|_| stopped())?
}

fn backend(message: String) -> Error {
    Error::Backend(BackendError::new(BackendErrorKind::Other, message))
}

fn stopped() -> Error {
    backend("the SQLite thread stopped before answering".into())
}

fn panicked(payload: &(dyn Any + Send)) -> Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".into());
    backend(format!("a SQLite call panicked: {what}"))
}
