//! [`Worker`]: the thread that owns a [`SqliteDatabase`](super::SqliteDatabase)'s
//! connection and runs the calls queued to it, in the order they were
//! queued; and [`Worker::run_here`], which runs a call on the caller's
//! thread instead, once everything queued before it has run.
//!
//! The connection sits behind a mutex that the thread and
//! [`Worker::run_here`] share. A queued call crosses to the thread over a
//! channel and its result comes back on a oneshot: two thread wake-ups, 20
//! to 60 µs here, against a 4 µs `get`. So on a multi-thread runtime
//! calls run on the caller's thread inside [`tokio::task::block_in_place`]
//! (see [`inline_allowed`]), which hands the runtime's work on that thread
//! to another before the call starts: file I/O and SQLite's lock waits
//! still never hold up other tasks. On a current-thread runtime, where that
//! is impossible, calls are queued to the thread. The queue is first in,
//! first out, and [`Worker::pending`] counts what is in it, so a call run
//! here waits for the queue to drain first: what was queued before a
//! statement runs before it, which is what lets a dropped transaction queue
//! its `ROLLBACK` ahead of everything that comes after it.
//!
//! The thread ends when the last [`Worker`] handle (the database's last
//! clone) drops: the queue's receiver then sees the channel closed, runs
//! what was queued before, and drops the connection, so closing it (which
//! checkpoints the WAL and removes the `-wal` and `-shm` files) is file I/O
//! on that thread too. The drop of the handle waits for the thread to end
//! (it joins it), so the file is whole when the drop returns: a program
//! that exits right after it does not kill the thread before the close.
//! The wait is short and cannot deadlock: nothing can be queued any more,
//! the calls queued before are plain SQLite calls that need nothing of the
//! dropping thread (a lock wait is bounded by `busy_timeout`), and a drop
//! on the database's own thread (a queued closure that held the last
//! clone) does not wait for itself. A panic in a call is caught and comes
//! back as an error of that call; the database goes on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::ports::error::{BackendError, BackendErrorKind, Error, Result};

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The name of every database's thread.
pub(super) const THREAD_NAME: &str = "eventsource-sqlite";

/// The sending end of one database's queue (its thread holds the other),
/// and the connection both share.
pub(super) struct Worker {
    // Declared (so dropped) before `jobs`: the thread, which holds the
    // other reference, is the last owner and closes the connection.
    conn: Arc<Mutex<Connection>>,
    pending: Arc<AtomicUsize>,
    // Dropped before `thread`: the closed queue ends the thread's loop.
    jobs: mpsc::Sender<Job>,
    _thread: Joined,
}

/// The database's thread, joined when dropped (after the queue closed):
/// the connection is closed when the last handle's drop returns.
struct Joined(Option<std::thread::JoinHandle<()>>);

impl Drop for Joined {
    fn drop(&mut self) {
        let Some(thread) = self.0.take() else {
            return;
        };
        // Dropped by a call on the thread itself: it ends once this
        // call returns, and cannot wait for itself.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        if thread.join().is_err() {
            tracing::warn!("the SQLite thread panicked while closing its connection");
        }
    }
}

/// True when a call may run on the caller's thread: on a multi-thread
/// runtime, where [`tokio::task::block_in_place`] can hand the runtime's
/// work on this thread to another while the call runs.
pub(super) fn inline_allowed() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

impl Worker {
    /// Starts the thread and opens the connection on it with `open`.
    pub(super) async fn start<F>(open: F) -> Result<Self>
    where
        F: FnOnce() -> Result<Connection> + Send + 'static,
    {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, ready) = oneshot::channel::<Result<Arc<Mutex<Connection>>>>();
        let pending = Arc::new(AtomicUsize::new(0));
        let left = pending.clone();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let conn = match catch_unwind(AssertUnwindSafe(open))
                    .unwrap_or_else(|p| Err(panicked(&*p)))
                {
                    Ok(conn) => Arc::new(Mutex::new(conn)),
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                if opened.send(Ok(conn.clone())).is_err() {
                    return; // the open was dropped
                }
                while let Ok(job) = queue.recv() {
                    job(&mut lock(&conn));
                    left.fetch_sub(1, Ordering::AcqRel);
                }
            })
            .map_err(|e| backend(format!("cannot start the SQLite thread: {e}")))?;
        let conn = ready.await.map_err(|_| stopped())??;
        Ok(Self {
            conn,
            pending,
            jobs,
            _thread: Joined(Some(thread)),
        })
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
            let _ = reply.send(guarded(f, c));
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
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.jobs.send(job).map_err(|_| {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            stopped()
        })
    }

    /// Calls queued and not yet finished.
    pub(super) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Runs `f` on the caller's thread, inside
    /// [`tokio::task::block_in_place`] (only when [`inline_allowed`]), after
    /// waiting for what is queued. The caller must keep new calls from
    /// being queued meanwhile (hold the gate, or the transaction that
    /// does).
    pub(super) async fn run_here<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&mut Connection) -> Result<T>,
    {
        if self.pending() > 0 {
            // First in, first out: what was queued before runs before.
            self.call(|_| Ok(())).await?;
        }
        self.run_inline(f)
    }

    /// Runs `f` on the caller's thread inside
    /// [`tokio::task::block_in_place`] now; the caller has checked that
    /// nothing is queued ([`Worker::pending`] is 0) and keeps new calls
    /// from being queued meanwhile, as for [`Worker::run_here`].
    pub(super) fn run_inline<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&mut Connection) -> Result<T>,
    {
        tokio::task::block_in_place(|| guarded(f, &mut lock(&self.conn)))
    }
}

/// The connection; a panic while it was held (caught, and answered as an
/// error) does not make it unusable.
fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `f`'s result, or its panic as an error.
fn guarded<T, F>(f: F, c: &mut Connection) -> Result<T>
where
    F: FnOnce(&mut Connection) -> Result<T>,
{
    catch_unwind(AssertUnwindSafe(|| f(c))).unwrap_or_else(|p| Err(panicked(&*p)))
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

/// Runs `fut` to completion inside one [`tokio::task::block_in_place`] when
/// [`inline_allowed`] (the SQLite calls in it then run on this thread, with
/// no hand-over of the runtime's work per call); else just awaits it.
/// Under `block_in_place` the first poll runs `fut` to its end, so it is
/// never dropped half-way.
pub(super) async fn in_one_go<F: std::future::Future>(fut: F) -> F::Output {
    if inline_allowed() {
        tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(fut))
    } else {
        fut.await
    }
}
