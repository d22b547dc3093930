//! The idle dedicated sessions kept for the next contended wait, and the
//! cap on how many dedicated sessions are open at once.
//!
//! A waiting `pg_advisory_lock` blocks every statement queued behind it on
//! its connection, so each wait runs alone on a session that holds no other
//! lock. A semaphore caps their number (a wait line queues for a permit
//! within its waiters' deadlines); a few idle ones are kept for reuse.

use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::mailbox::SessionHandle;

pub(crate) struct WaitPool {
    idle: Mutex<Vec<SessionHandle>>,
    pub(crate) permits: Arc<Semaphore>,
    max_idle: usize,
}

impl WaitPool {
    pub(crate) fn new(max_sessions: usize, max_idle: usize) -> Arc<Self> {
        Arc::new(Self {
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(max_sessions)),
            max_idle,
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

    /// Keeps an idle session for later; false if the pool is full.
    pub(super) fn park(&self, handle: SessionHandle) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|h| !h.is_dead());
        if idle.len() < self.max_idle {
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
