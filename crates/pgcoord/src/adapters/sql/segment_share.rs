//! How many segments a [`SegmentedRunner`](super::SegmentedRunner) runs:
//! [`RunnerCensus`] counts the runners, and [`Share`] turns the count into
//! this runner's share at each look, so that the segments end up split as
//! evenly as they divide.

use std::future::Future;

use crate::ports::error::Result;
use crate::ports::locks::LockGuard;
use crate::ports::shared_locks::SharedLock;

/// A lock manager that can count the holders of a shared key across every
/// process (the PostgreSQL manager reads `pg_locks`).
pub trait RunnerCensus: SharedLock {
    /// How many holders `key` has now, in every process.
    ///
    /// # Cancel safety
    ///
    /// Implementations must be cancel safe (a read).
    fn holders_of(&self, key: &str) -> impl Future<Output = Result<usize>> + Send;
}

/// Looks in a row at which a runner ran fewer segments than the even
/// split gives everyone before it says so (it tried every free segment in
/// between, and others gave up what they had too many of).
const SHORT_LOOKS: u32 = 3;

/// One runner's share of `segments`, set at each look.
///
/// With `r` runners each runs at most `ceil(segments / r)`. When that does
/// not divide evenly, the first runners to fill their share can leave a
/// later one below `floor(segments / r)` for good (4 segments, 3 runners:
/// 2, 2 and 0). So a runner that stays below the floor holds the shared
/// key `projection:{name}/waiting`, and while anyone holds it every runner's
/// share is the floor: those above it give a segment up, the waiting runner
/// takes it, lets the key go, and the share is the ceiling again.
#[derive(Debug)]
pub(super) struct Share {
    segments: usize,
    runners_key: String,
    waiting_key: String,
    share: usize,
    short_looks: u32,
    waiting: Option<LockGuard>,
}

impl Share {
    pub(super) fn new(projection: &str, segments: usize) -> Self {
        Self {
            segments,
            runners_key: format!("projection:{projection}/runners"),
            waiting_key: format!("projection:{projection}/waiting"),
            share: segments,
            short_looks: 0,
            waiting: None,
        }
    }

    /// The share of the last look.
    pub(super) fn get(&self) -> usize {
        self.share
    }

    /// A look, with this runner running `running` segments: counts the
    /// runners (and those waiting for their share), says whether this one
    /// waits, and returns the share. A count that fails keeps the share.
    pub(super) async fn look<L: RunnerCensus>(
        &mut self,
        locks: &L,
        running: usize,
        projection: &str,
    ) -> usize {
        let runners = match locks.holders_of(&self.runners_key).await {
            Ok(runners) => runners.max(1),
            Err(e) => {
                tracing::warn!(projection = %projection, error = %e,
                    "segmented runner: cannot count the runners; keeping the share");
                return self.share;
            }
        };
        let (floor, ceil) = (self.segments / runners, self.segments.div_ceil(runners));
        if running < floor {
            self.short_looks += 1;
        } else {
            self.short_looks = 0;
        }
        let short = floor < ceil && self.short_looks >= SHORT_LOOKS;
        self.say_waiting(locks, short, projection).await;
        if floor == ceil {
            self.share = ceil;
            return ceil;
        }
        self.share = match locks.holders_of(&self.waiting_key).await {
            Ok(0) => ceil,
            Ok(_) => floor,
            Err(_) => self.share,
        };
        self.share
    }

    /// Holds the waiting key while `short`, and only then (best effort: a
    /// failure is logged and tried again at the next look).
    async fn say_waiting<L: RunnerCensus>(&mut self, locks: &L, short: bool, projection: &str) {
        if self.waiting.as_ref().is_some_and(LockGuard::is_lost) {
            self.waiting = None;
        }
        match (short, self.waiting.take()) {
            (true, None) => match locks.try_lock_shared(&self.waiting_key).await {
                Ok(hold) => {
                    if hold.is_some() {
                        tracing::info!(projection = %projection,
                            "segmented runner: below its share; asking the others to make room");
                    }
                    self.waiting = hold;
                }
                Err(e) => tracing::debug!(projection = %projection, error = %e,
                    "segmented runner: cannot say it waits for its share"),
            },
            (true, hold) => self.waiting = hold,
            (false, Some(hold)) => {
                let _ = hold.release().await;
            }
            (false, None) => {}
        }
    }

    /// Lets the waiting key go, if held (at the end of a run).
    pub(super) async fn release(&mut self) {
        if let Some(hold) = self.waiting.take() {
            let _ = hold.release().await;
        }
    }
}
