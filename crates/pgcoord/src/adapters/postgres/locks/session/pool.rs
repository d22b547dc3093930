//! The idle dedicated sessions kept for the next contended wait, and the
//! cap on how many dedicated sessions are open at once.
//!
//! A waiting `pg_advisory_lock` blocks every statement queued behind it on
//! its connection, so each wait runs alone on a session that holds no other
//! lock. A semaphore caps their number (a wait line queues for a permit
//! within its waiters' deadlines); a few idle ones are kept for reuse, but
//! only within the bound a manager promises for its contended keys: at most
//! two dedicated sessions per key with a wait line (one waiting, one
//! holding what the last wait was granted), and two when no key has one.
//! An idle session counts against that bound like a busy one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::mailbox::SessionHandle;

pub(crate) struct WaitPool {
    idle: Mutex<Vec<SessionHandle>>,
    pub(crate) permits: Arc<Semaphore>,
    max_sessions: usize,
    max_idle: usize,
    /// Keys with a wait line now (kept by the wait lines).
    lines: AtomicUsize,
}

impl WaitPool {
    pub(crate) fn new(max_sessions: usize, max_idle: usize) -> Arc<Self> {
        Arc::new(Self {
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(max_sessions)),
            max_sessions,
            max_idle,
            lines: AtomicUsize::new(0),
        })
    }

    /// An idle live session, if one is parked.
    pub(crate) fn take(&self) -> Option<SessionHandle> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(h) = idle.pop() {
            if !h.is_dead() {
                return Some(h);
            }
        }
        None
    }

    /// Records how many keys have a wait line now.
    pub(crate) fn set_lines(&self, n: usize) {
        self.lines.store(n, Ordering::Relaxed);
    }

    /// Keeps an idle session for later (it has given back its permit);
    /// false if the pool is full, or if keeping it would leave more
    /// dedicated sessions open than two per key with a wait line.
    pub(super) fn park(&self, handle: SessionHandle) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|h| !h.is_dead());
        let busy = self
            .max_sessions
            .saturating_sub(self.permits.available_permits());
        let bound = 2 * self.lines.load(Ordering::Relaxed).max(1);
        if idle.len() < self.max_idle && busy + idle.len() < bound {
            idle.push(handle);
            true
        } else {
            false
        }
    }

    /// Forgets every idle session (they close once the manager is closed).
    pub(crate) fn clear(&self) {
        let drained: Vec<SessionHandle> = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.drain(..).collect()
        };
        drop(drained);
    }
}
