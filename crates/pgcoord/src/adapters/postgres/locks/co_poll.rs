//! [`CoPolled`]: a future that its own task polls, and that a task waiting
//! for one of its answers may poll in its place (flat combining).
//!
//! A lock session's work (its actor and its tokio-postgres connection,
//! see `session/drive.rs`) runs in a task of its own, so a caller's future
//! being dropped never leaves a statement half-sent. But handing each
//! request to that task costs a wake-up of another task, and its answer a
//! wake-up of the caller: two scheduler round trips per statement where a
//! plain driver has none. Here a caller that waits for an answer
//! ([`CoPolled::help`]) first polls the session's work itself, in its own
//! task, when no one else is polling it: its request (and whatever other
//! callers queued behind it) goes out as one batch, and the server's answer
//! wakes this caller, not the session's task. The work stays in one place,
//! owned by neither: a helper that is dropped mid-statement just stops
//! helping, and the session's own task takes over (it is woken whenever a
//! helper leaves owing a poll). So every cancel-safety promise of the
//! session holds as before.
//!
//! At most one helper at a time receives the work's wake-ups; the others
//! wait for their answers as before. Polls of the work never overlap (a
//! `Mutex`, taken with `try_lock` only, never held across an `await`);
//! wake-ups that arrive while it is being polled are not sent to any
//! scheduler but looped over (up to [`MAX_ROUNDS`] times per poll). A
//! helper helps only from the runtime the work started on, so its timers
//! and sockets stay on that runtime's drivers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Rounds of polling per poll before the poller yields to others.
const MAX_ROUNDS: usize = 16;

/// How often a poller polls again for wake-ups that came while it still
/// held the work, before it leaves them to the work's own task.
const MAX_REPOLLS: usize = 4;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The shared work; see the module docs.
pub(crate) struct CoPolled {
    slot: Mutex<Slot>,
    /// The runtime the work started on; only its tasks help.
    runtime: OnceLock<tokio::runtime::Id>,
    wakes: Arc<Wakes>,
    waker: Waker,
}

struct Slot {
    work: Option<Work>,
}

/// Where the work's wake-ups go.
struct Wakes {
    /// Someone is polling the work right now: a wake-up is only noted.
    polling: AtomicBool,
    /// A wake-up arrived since the last round started.
    woken: AtomicBool,
    /// The work's own task.
    task: AtomicWaker,
    helper: Mutex<Helper>,
    /// The id of `helper`, readable without its mutex (0: none): a caller
    /// that finds another helper there does not queue for the mutex.
    helper_id: AtomicU64,
    next_id: AtomicU64,
}

/// The one helper that receives wake-ups (id 0: none).
#[derive(Default)]
struct Helper {
    id: u64,
    waker: Option<Waker>,
    /// Woken and not yet polled: if it leaves now, the task must poll.
    owes: bool,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if self.polling.load(Ordering::SeqCst) {
            return; // the poller loops once more
        }
        let helper = {
            let mut h = self.helper.lock().unwrap_or_else(|p| p.into_inner());
            if h.id == 0 {
                None
            } else {
                h.owes = true;
                // None: already woken, it will poll or, leaving, wake the task.
                Some(h.waker.take())
            }
        };
        match helper {
            Some(Some(waker)) => waker.wake(),
            Some(None) => {}
            None => self.task.wake(),
        }
    }
}

impl CoPolled {
    pub(crate) fn new() -> Arc<Self> {
        let wakes = Arc::new(Wakes {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
            helper: Mutex::new(Helper::default()),
            helper_id: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
        });
        Arc::new(Self {
            slot: Mutex::new(Slot { work: None }),
            runtime: OnceLock::new(),
            waker: Waker::from(wakes.clone()),
            wakes,
        })
    }

    /// The work's own task: installs `work` and polls it until it is done.
    /// Must be polled inside a tokio runtime (it is spawned as a task).
    /// Dropping it before then drops the work.
    pub(crate) fn run<W>(self: &Arc<Self>, work: W) -> OwnTask
    where
        W: Future<Output = ()> + Send + 'static,
    {
        OwnTask {
            co: self.clone(),
            pending: Some(Box::pin(work)),
        }
    }

    /// Waits for `reply`, polling the work meanwhile whenever nobody else
    /// does (see the module docs). Takes the `Arc` it keeps: a caller that
    /// already owns one passes it on instead of cloning it again.
    pub(crate) fn help<R: Future + Unpin>(self: Arc<Self>, reply: R) -> Helping<R> {
        Helping {
            reply,
            co: Some(self),
            id: 0,
        }
    }

    /// Polls the work now unless someone else is; true once it is done.
    fn poll_work(&self) -> bool {
        for _ in 0..MAX_REPOLLS {
            let mut slot = match self.slot.try_lock() {
                Ok(slot) => slot,
                // The poller re-checks for wake-ups after letting go.
                Err(TryLockError::WouldBlock) => return false,
                Err(TryLockError::Poisoned(p)) => {
                    // The work panicked while being polled: it is over, and
                    // dropping it answers whatever waited for it.
                    let work = p.into_inner().work.take();
                    drop(work);
                    self.wakes.task.wake();
                    return true;
                }
            };
            let Some(work) = slot.work.as_mut() else {
                return true;
            };
            let mut cx = Context::from_waker(&self.waker);
            let (mut done, mut busy) = (false, true);
            for _ in 0..MAX_ROUNDS {
                self.wakes.polling.store(true, Ordering::SeqCst);
                self.wakes.woken.store(false, Ordering::SeqCst);
                done = work.as_mut().poll(&mut cx).is_ready();
                self.wakes.polling.store(false, Ordering::SeqCst);
                if done || !self.wakes.woken.swap(false, Ordering::SeqCst) {
                    busy = false;
                    break;
                }
            }
            let finished = done.then(|| slot.work.take());
            drop(slot);
            if let Some(work) = finished {
                drop(work);
                self.wakes.task.wake(); // so the own task ends too
                return true;
            }
            if busy {
                // Still busy: whoever is woken polls again, after others ran.
                self.wakes.wake_by_ref();
                return false;
            }
            // A wake-up that came after the last round, while the slot was
            // still held, may have found it taken: look again.
            if !self.wakes.woken.load(Ordering::SeqCst) {
                return false;
            }
        }
        self.wakes.task.wake();
        false
    }

    /// Makes `id` the helper that receives wake-ups, if there is none;
    /// true if it is (now) the helper.
    fn enter(&self, id: &mut u64, waker: &Waker) -> bool {
        let mut h = self.wakes.helper.lock().unwrap_or_else(|p| p.into_inner());
        if h.id == 0 {
            if *id == 0 {
                *id = self.wakes.next_id.fetch_add(1, Ordering::Relaxed);
            }
            h.id = *id;
            self.wakes.helper_id.store(*id, Ordering::Relaxed);
        }
        if h.id != *id {
            return false;
        }
        match &h.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => h.waker = Some(waker.clone()),
        }
        // It polls right after this.
        h.owes = false;
        true
    }

    /// `id` stops helping; if it was woken and has not polled since, the
    /// work's own task polls instead.
    fn leave(&self, id: u64) {
        if id == 0 {
            return;
        }
        let owes = {
            let mut h = self.wakes.helper.lock().unwrap_or_else(|p| p.into_inner());
            if h.id != id {
                return;
            }
            let owes = h.owes;
            *h = Helper::default();
            self.wakes.helper_id.store(0, Ordering::Relaxed);
            owes
        };
        if owes {
            self.wakes.task.wake();
        }
    }

    /// Whether another task is the helper now. Only a hint (it may leave
    /// a moment later), which is enough: whoever is the helper, or else
    /// the work's own task, keeps the work going.
    fn helped_by_other(&self, id: u64) -> bool {
        let helper = self.wakes.helper_id.load(Ordering::Relaxed);
        helper != 0 && helper != id
    }

    /// Whether the current task may poll the work: it runs on the runtime
    /// the work started on. `None` while the work has not started.
    fn may_help(&self) -> Option<bool> {
        let id = self.runtime.get()?;
        let here = tokio::runtime::Handle::try_current().map(|h| h.id());
        Some(here.is_ok_and(|here| here == *id))
    }
}

/// The work's own task ([`CoPolled::run`]).
pub(crate) struct OwnTask {
    co: Arc<CoPolled>,
    pending: Option<Work>,
}

impl Future for OwnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.co.wakes.task.register(cx.waker());
        if let Some(work) = this.pending.take() {
            this.co.slot.lock().unwrap_or_else(|p| p.into_inner()).work = Some(work);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                let _ = this.co.runtime.set(handle.id());
            }
        }
        match this.co.poll_work() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

impl Drop for OwnTask {
    fn drop(&mut self) {
        // The runtime is going away (or the work is done): nothing polls
        // the work any more, so it is dropped here, not kept alive by the
        // handles that point at it.
        let work = {
            let mut slot = self.co.slot.lock().unwrap_or_else(|p| p.into_inner());
            slot.work.take()
        };
        drop(work);
    }
}

/// Waits for a reply while helping the work along ([`CoPolled::help`]).
pub(crate) struct Helping<R> {
    reply: R,
    /// `None` once this task is known not to help (another runtime).
    co: Option<Arc<CoPolled>>,
    /// Its helper id (0 until it first helps).
    id: u64,
}

impl<R: Future + Unpin> Future for Helping<R> {
    type Output = R::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R::Output> {
        let this = &mut *self;
        let help = match &this.co {
            // Someone else helps: this poll only looks at the reply. It
            // skips the helper's mutex and the runtime check (a clone of
            // the runtime's handle), both shared by every caller.
            Some(co) if co.helped_by_other(this.id) => None,
            Some(co) if this.id == 0 => co.may_help(),
            Some(_) => Some(true),
            None => Some(false),
        };
        if help == Some(false) {
            this.co = None;
        }
        // Borrowed, not cloned: the work's `Arc` is shared by every caller
        // of the session, and a clone per poll is a write to one counter
        // that all worker threads touch.
        match (help, this.co.as_ref()) {
            (Some(true), Some(co)) if co.enter(&mut this.id, cx.waker()) => {
                // Polling the work may answer this very caller. Its reply
                // would then wake this task while it runs, and tokio treats
                // a task woken during its own poll as one that yielded: it
                // goes to the back of the queue and another worker is woken
                // to take it. So the reply waits on a no-op waker while the
                // work is polled; the poll below, with the real waker, sees
                // any answer given meanwhile.
                let mut quiet = Context::from_waker(Waker::noop());
                if let Poll::Ready(out) = Pin::new(&mut this.reply).poll(&mut quiet) {
                    co.leave(this.id);
                    this.co = None;
                    return Poll::Ready(out);
                }
                co.poll_work();
            }
            _ => {}
        }
        match Pin::new(&mut this.reply).poll(cx) {
            Poll::Ready(out) => {
                if let Some(co) = this.co.take() {
                    co.leave(this.id);
                }
                Poll::Ready(out)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<R> Drop for Helping<R> {
    fn drop(&mut self) {
        if let Some(co) = self.co.take() {
            co.leave(self.id);
        }
    }
}

#[cfg(test)]
#[path = "co_poll_tests.rs"]
mod tests;
