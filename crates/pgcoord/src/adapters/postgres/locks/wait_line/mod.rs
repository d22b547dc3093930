//! Wait lines: the contended path, one line per lock id.
//!
//! Local tasks that wait for one key queue here in arrival order, and one
//! wait at a time runs inside PostgreSQL on behalf of the whole line (on a
//! dedicated session). A grant goes to the first task still waiting; once
//! it is unlocked, the next wait joins the end of PostgreSQL's queue,
//! behind other processes that queued meanwhile. So:
//!
//! - a manager uses one dedicated session per contended key (it waits,
//!   holds the grant, then waits again: [`seats`]), however many tasks
//!   wait;
//! - across processes, PostgreSQL serves waits in arrival order; within a
//!   process, tasks are served in arrival order; no waiter starves;
//! - a task that gives up (timeout, dropped future) just leaves the line.
//!   Only when nobody is left is the server-side wait cancelled, and a grant
//!   that raced the last departure is given back at once.
//!
//! This file keeps the lines; `driver.rs` serves each one.

mod driver;
mod recent;
mod seats;

use super::id_map::IdMap;
use super::metrics::WaitingTask;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::session::{Granted, SessionContext, WaitPool};
use crate::ports::error::AcquireFailure;

pub(crate) type LineResult = Result<Granted, AcquireFailure>;

pub(super) struct Waiter {
    pub(super) tx: oneshot::Sender<LineResult>,
    pub(super) deadline: Option<Instant>,
}

pub(super) struct Line {
    pub(super) waiters: VecDeque<Waiter>,
    /// Told when a waiter leaves, so the driver can abandon an unwanted wait.
    changed: Arc<Notify>,
}

/// Every wait line of one manager.
pub(crate) struct WaitLines {
    pub(super) ctx: Arc<SessionContext>,
    pub(super) pool: Arc<WaitPool>,
    lines: Mutex<IdMap<i64, Line>>,
    /// One dedicated session per key ([`seats`]).
    seats: seats::Seats,
    /// Keys whose try-lock failed a moment ago ([`recent`]).
    recent: recent::Recent,
    /// Told when a line ends or a task joins one (see [`Self::settled`]).
    activity: Notify,
}

/// A place in a line; dropping it leaves the line.
pub(crate) struct Ticket {
    pub(crate) rx: oneshot::Receiver<LineResult>,
    changed: Arc<Notify>,
    _waiting: WaitingTask,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Close the receiver before telling the driver: the fields are
        // dropped only after this body, and a driver woken in between would
        // still see this waiter as present and never be told again.
        self.rx.close();
        self.changed.notify_one();
    }
}

impl WaitLines {
    pub(crate) fn new(ctx: Arc<SessionContext>, pool: Arc<WaitPool>) -> Arc<Self> {
        Arc::new(Self {
            ctx,
            pool,
            lines: Mutex::new(IdMap::default()),
            seats: seats::Seats::default(),
            recent: recent::Recent::new(),
            activity: Notify::new(),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, IdMap<i64, Line>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether tasks of this manager already wait for `lock_id` (a newcomer
    /// then queues behind them instead of trying first).
    pub(crate) fn has_line(&self, lock_id: i64) -> bool {
        self.lock().contains_key(&lock_id)
    }

    /// A try-lock of `lock_id` found it held (by anyone).
    pub(crate) fn found_held(&self, lock_id: i64) {
        self.recent.held(lock_id);
    }

    /// Whether a try-lock of `lock_id` found it held within the last few
    /// milliseconds: the next acquisition then queues at once (see
    /// [`recent`]).
    pub(crate) fn recently_held(&self, lock_id: i64) -> bool {
        self.recent.contended(lock_id)
    }

    /// Joins the line for `lock_id`, starting it if there is none.
    pub(crate) fn join(
        self: &Arc<Self>,
        lock_id: i64,
        key: &Arc<str>,
        deadline: Option<Instant>,
    ) -> Ticket {
        let (tx, rx) = oneshot::channel();
        let mut lines = self.lock();
        let start = !lines.contains_key(&lock_id);
        let line = lines.entry(lock_id).or_insert_with(|| Line {
            waiters: VecDeque::new(),
            changed: Arc::new(Notify::new()),
        });
        line.waiters.push_back(Waiter { tx, deadline });
        let ticket = Ticket {
            rx,
            changed: line.changed.clone(),
            _waiting: WaitingTask::start(),
        };
        if start {
            let changed = line.changed.clone();
            tokio::spawn(self.clone().drive(lock_id, key.clone(), changed));
        }
        drop(lines);
        self.activity.notify_waiters();
        ticket
    }

    /// Resolves once `lock_id` has no line that every task has left: such
    /// a line still has a wait in the server (left to end by its own
    /// `lock_timeout`, or being cancelled), which would take the key for
    /// nobody. That ends within about [`driver::LET_SERVER_TIME_OUT`], or a
    /// cancel's round trip. A line with tasks in it is no reason to wait.
    pub(crate) async fn settled(&self, lock_id: i64) {
        loop {
            let activity = self.activity.notified();
            tokio::pin!(activity);
            activity.as_mut().enable();
            let deserted = self
                .lock()
                .get(&lock_id)
                .is_some_and(|l| l.waiters.iter().all(|w| w.tx.is_closed()));
            if !deserted {
                return;
            }
            activity.await;
        }
    }

    /// Drops departed waiters; `None` (and the line removed) when nobody is
    /// left, else the `lock_timeout` for the next server-side wait: the
    /// latest deadline, or none if someone waits without one.
    pub(super) fn next_wait(&self, lock_id: i64) -> Option<Option<Duration>> {
        let mut lines = self.lock();
        let line = lines.get_mut(&lock_id)?;
        line.waiters.retain(|w| !w.tx.is_closed());
        if line.waiters.is_empty() || self.ctx.closed.is_raised() {
            let line = lines.remove(&lock_id)?;
            drop(lines);
            self.activity.notify_waiters();
            for w in line.waiters {
                let _ = w.tx.send(Err(AcquireFailure::ManagerClosed));
            }
            return None;
        }
        let now = Instant::now();
        let mut latest = Some(Duration::ZERO);
        for w in &line.waiters {
            latest = match (latest, w.deadline) {
                (Some(l), Some(d)) => Some(l.max(d.saturating_duration_since(now))),
                _ => None,
            };
        }
        Some(latest.map(|l| l.max(Duration::from_millis(1))))
    }

    /// How many tasks wait in all lines now.
    pub(crate) fn waiting(&self) -> usize {
        self.lock()
            .values()
            .map(|l| l.waiters.iter().filter(|w| !w.tx.is_closed()).count())
            .sum()
    }

    /// The earliest deadline of a task still waiting.
    pub(super) fn earliest_deadline(&self, lock_id: i64) -> Option<Instant> {
        let lines = self.lock();
        let line = lines.get(&lock_id)?;
        line.waiters
            .iter()
            .filter(|w| !w.tx.is_closed())
            .filter_map(|w| w.deadline)
            .min()
    }

    pub(super) fn anyone_waiting(&self, lock_id: i64) -> bool {
        self.lock()
            .get(&lock_id)
            .is_some_and(|l| l.waiters.iter().any(|w| !w.tx.is_closed()))
    }

    /// Gives a grant to the first task still waiting; gives it back if none is.
    pub(super) fn deliver(&self, lock_id: i64, mut granted: Granted) {
        let mut lines = self.lock();
        let token = granted.lock.token();
        if let Some(line) = lines.get_mut(&lock_id) {
            while let Some(w) = line.waiters.pop_front() {
                // Claimed before it is sent: the task that receives it may
                // look at the book at once, and must find its lock there.
                self.ctx.holdings.claim(lock_id, token);
                match w.tx.send(Ok(granted)) {
                    // The task owns it now (dropped unreceived, it is
                    // unlocked like any guard).
                    Ok(()) => return,
                    Err(Ok(g)) => {
                        self.ctx.holdings.unclaim(lock_id, token);
                        granted = g;
                    }
                    Err(Err(_)) => unreachable!("a grant was sent"),
                }
            }
        }
        drop(lines);
        // Nobody wanted it: never claimed, it was never counted as this
        // manager's; the unlock goes to its session.
        drop(granted);
    }

    /// Fails the first waiter (`all`: every waiter) with `failure`.
    pub(super) fn fail(&self, lock_id: i64, all: bool, failure: impl Fn() -> AcquireFailure) {
        let mut lines = self.lock();
        let Some(line) = lines.get_mut(&lock_id) else {
            return;
        };
        while let Some(w) = line.waiters.pop_front() {
            let sent = w.tx.send(Err(failure())).is_ok();
            if sent && !all {
                return;
            }
        }
    }
}
