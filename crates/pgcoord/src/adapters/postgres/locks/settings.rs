//! [`Settings`]: what a lock manager is configured with, fixed at build time.
//!
//! Pure data at the bottom of the adapter: the builder fills it in, every
//! layer below reads it.

use std::time::Duration;

/// One more batched session is opened (up to `max_batched_sessions`) for
/// new work while the open ones hold this many locks or more each on
/// average. PostgreSQL walks a session's whole local lock table at the end
/// of every statement, so a statement on a session that holds thousands of
/// locks costs more: the new session takes the work where it is cheap.
/// 5,000 keeps 10,000 held locks on the two default sessions, and the
/// 10,001st goes to a third. (The total, not each session's count, decides:
/// how evenly concurrent callers spread their locks does not.)
pub(crate) const LOCKS_PER_BATCHED_SESSION: usize = 5_000;

/// The longest lease: PostgreSQL's largest `idle_session_timeout` (and
/// `tcp_user_timeout`), `INT_MAX` ms, about 24.8 days. With a longer one
/// the server would end a silent holder's session (and free its locks)
/// before the holder's lease clock counts them lost.
/// The most sessions of one kind a manager may be set to open: each is a
/// database connection, and PostgreSQL's `max_connections` is at most
/// 262,143. Larger settings are refused by `build` (they used to overflow
/// an allocation or tokio's semaphore).
pub(crate) const MAX_SESSIONS: usize = 262_143;

pub(crate) const MAX_LEASE: Duration = Duration::from_millis(i32::MAX as u64);

/// While the other batched sessions hold nothing, new work stays on the
/// first one until it holds more than this many locks. One session's
/// statements carry every caller queued behind them, and the server's cost
/// is mostly per statement: two sessions sharing a load run two statements
/// of half the size each. Measured with 64 tasks, that cost about 70% more
/// server CPU a pair; with 1,024 tasks (up to about 1,000 held at once), a
/// limit of 512 sent half the work to the second session and cost 75% more
/// than this one. Once locks are held on more than one session, new work
/// goes to the one holding fewest.
pub(crate) const LIGHT_SESSION_LOCKS: usize = 2048;

/// Settings of a lock manager.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) holder_id: Option<std::sync::Arc<str>>,
    pub(crate) max_held_locks: usize,
    pub(crate) batched_sessions: usize,
    /// The most batched sessions, opened past `batched_sessions` when every
    /// open one holds [`LOCKS_PER_BATCHED_SESSION`] locks or more.
    pub(crate) max_batched_sessions: usize,
    pub(crate) max_wait_sessions: usize,
    pub(crate) max_idle_wait_sessions: usize,
    pub(crate) liveness_interval: Duration,
    pub(crate) liveness_timeout: Duration,
    pub(crate) max_batch: usize,
    /// Lock on a hot standby anyway (its locks exclude only its own sessions).
    pub(crate) allow_standby: bool,
    /// One session for everything: waits and `holders()` run on the one
    /// batched session, which then holds at most one lock.
    pub(crate) single_session: bool,
    /// Every grant bumps the key's row in the fencing table and carries
    /// the new token.
    pub(crate) fencing: bool,
    /// Lease mode: the server ends a session silent for this long, and a
    /// holder treats its locks as lost shortly before it could have.
    pub(crate) lease: Option<Duration>,
    /// Opt-in metrics attribute: a bounded key prefix.
    pub(crate) key_prefixes: Option<std::sync::Arc<super::metrics::KeyPrefixes>>,
}

impl Settings {
    /// How often an idle session checks that it is alive: the liveness
    /// interval, and in lease mode at least four times per lease.
    pub(crate) fn ping_interval(&self) -> Duration {
        match self.lease {
            Some(lease) => self.liveness_interval.min(lease / 4),
            None => self.liveness_interval,
        }
    }

    /// Refuses a setting out of its documented range, naming it.
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |what: String| Err(crate::Error::InvalidArgument(what));
        let ms10 = Duration::from_millis(10);
        if self.max_held_locks == 0 {
            return bad("max_held_locks must be at least 1".into());
        }
        if self.batched_sessions == 0 {
            return bad("batched_sessions must be at least 1".into());
        }
        if self.max_batched_sessions < self.batched_sessions {
            return bad(format!(
                "max_batched_sessions ({}) must be at least batched_sessions ({})",
                self.max_batched_sessions, self.batched_sessions
            ));
        }
        if self.max_wait_sessions == 0 {
            return bad("max_wait_sessions must be at least 1".into());
        }
        for (name, n) in [
            ("batched_sessions", self.batched_sessions),
            ("max_batched_sessions", self.max_batched_sessions),
            ("max_wait_sessions", self.max_wait_sessions),
            ("max_idle_wait_sessions", self.max_idle_wait_sessions),
        ] {
            if n > MAX_SESSIONS {
                return bad(format!(
                    "{name} must be at most {MAX_SESSIONS} (PostgreSQL's largest \
                     max_connections), got {n}"
                ));
            }
        }
        if self
            .holder_id
            .as_deref()
            .is_some_and(|id| id.contains('\0'))
        {
            return bad(
                "holder_id must not contain a NUL character (PostgreSQL refuses it \
                        in application_name)"
                    .into(),
            );
        }
        if self.liveness_interval < ms10 {
            return bad(format!(
                "liveness_interval must be at least 10ms, got {:?}",
                self.liveness_interval
            ));
        }
        if self.liveness_timeout < ms10 {
            return bad(format!(
                "liveness_timeout must be at least 10ms, got {:?}",
                self.liveness_timeout
            ));
        }
        match self.lease {
            Some(lease) if lease < Duration::from_secs(1) => {
                bad(format!("lease must be at least 1s, got {lease:?}"))
            }
            Some(lease) if lease > MAX_LEASE => bad(format!(
                "lease must be at most {}ms (PostgreSQL's largest idle_session_timeout, \
                 about 24.8 days), got {lease:?}",
                MAX_LEASE.as_millis()
            )),
            _ => Ok(()),
        }
    }

    /// How long a liveness check may take: in lease mode at most half a lease.
    pub(crate) fn ping_timeout(&self) -> Duration {
        match self.lease {
            Some(lease) => self.liveness_timeout.min(lease / 2),
            None => self.liveness_timeout,
        }
    }

    /// How long after a statement was *sent* and answered a session counts
    /// as alive on the server in lease mode: the server's idle timer starts
    /// no earlier than that statement arrived, so it cannot end the session
    /// before `sent + lease`; the holder gives up a tenth earlier (at
    /// least 50 ms) so that it always knows first.
    pub(crate) fn lease_confirmed_for(&self) -> Option<Duration> {
        self.lease
            .map(|lease| lease.saturating_sub((lease / 10).max(Duration::from_millis(50))))
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            holder_id: None,
            max_held_locks: 4096,
            batched_sessions: 2,
            max_batched_sessions: 8,
            max_wait_sessions: 64,
            max_idle_wait_sessions: 4,
            liveness_interval: Duration::from_millis(500),
            liveness_timeout: Duration::from_secs(2),
            max_batch: 4096,
            allow_standby: false,
            single_session: false,
            fencing: false,
            lease: None,
            key_prefixes: None,
        }
    }
}
