//! [`LossSignal`]: how a holder learns that its lock is gone, and
//! [`LeaseClock`]: the deadline after which it must assume so.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::alarm::Alarm;
use super::session_end::SessionEnd;

/// The instant all lease clocks count from (process-wide).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Until when a session is known to be alive on the server, on the
/// monotonic clock.
///
/// An adapter in lease mode moves it forward each time the server
/// answers; a holder that stops being confirmed (frozen, cut off) passes
/// its deadline and treats its locks as lost *before* the server can have
/// released them. Cheap to share; every loss signal of one session holds
/// the same clock.
#[derive(Debug)]
pub struct LeaseClock {
    /// Nanoseconds after [`epoch`] until which the lease holds.
    until: AtomicU64,
    /// Whether passing the deadline loses the lock (a lease), or only
    /// bounds [`LossSignal::confirmed_until`] (the server's TCP timeouts,
    /// which a frozen holder's kernel still answers: see [`bound`](Self::bound)).
    fires: bool,
}

impl LeaseClock {
    /// A clock whose lease holds until `until`.
    pub fn new(until: Instant) -> Arc<Self> {
        Self::with(until, true)
    }

    /// A clock that only says until when the server cannot have freed a
    /// silent session's locks for silence (its TCP keepalive and
    /// `tcp_user_timeout`): [`LossSignal::confirmed_until`] reads it, but
    /// passing it loses nothing. A network cut is found sooner by the
    /// liveness check; a frozen holder's kernel still answers the
    /// server's keepalives, so the server keeps its locks.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn bound(until: Instant) -> Arc<Self> {
        Self::with(until, false)
    }

    fn with(until: Instant, fires: bool) -> Arc<Self> {
        let clock = Arc::new(Self {
            until: AtomicU64::new(0),
            fires,
        });
        clock.extend_to(until);
        clock
    }

    /// Whether passing the deadline loses the lock: a lease's clock, not a
    /// [`bound`](Self::bound).
    pub(crate) fn fires(&self) -> bool {
        self.fires
    }

    /// A lease's clock that has run out (never a [`bound`](Self::bound)).
    pub(crate) fn lease_over(&self) -> bool {
        self.fires && self.expired()
    }

    /// Moves the deadline to `until` if that is later than the current one.
    pub fn extend_to(&self, until: Instant) {
        let nanos = until.saturating_duration_since(epoch()).as_nanos();
        self.until
            .fetch_max(nanos.min(u64::MAX as u128) as u64, Ordering::AcqRel);
    }

    /// The current deadline.
    pub fn deadline(&self) -> Instant {
        epoch() + Duration::from_nanos(self.until.load(Ordering::Acquire))
    }

    /// True once the deadline has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.deadline()
    }
}

/// Tells whether a held lock has been lost.
///
/// Cheap to clone; every clone observes the same event. A lock is lost when
/// the database session holding it ends (backend terminated, server
/// restarted, network cut), fails its liveness check, or (in lease mode)
/// was not confirmed by the server before its lease deadline. The lease
/// check is made whenever the signal is read, so a holder that resumes
/// after being frozen sees the loss on its first look, before any timer
/// of its runtime has run.
///
/// [`LossSignal::any`] combines several (a set of locks held together is
/// lost when any member is).
#[derive(Clone, Default)]
pub struct LossSignal {
    source: Source,
    lease: Option<Arc<LeaseClock>>,
}

/// What a [`LossSignal`] fires on, besides its lease.
#[derive(Clone, Default)]
enum Source {
    #[default]
    Never,
    /// A third-party adapter's token.
    Token(CancellationToken),
    /// A lock of this crate's PostgreSQL manager: lost when its session
    /// ends or the lock alone is taken away.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Alarms {
        session: Arc<SessionEnd>,
        lock: Arc<Alarm>,
    },
    /// Set by [`LossSignal::any`]: lost when any of these is.
    Any(Arc<[LossSignal]>),
}

impl LossSignal {
    /// A signal that fires when `token` is cancelled. For adapters.
    pub fn from_token(token: CancellationToken) -> Self {
        Self {
            source: Source::Token(token),
            lease: None,
        }
    }

    /// A signal that fires when `token` is cancelled or `lease` expires.
    /// For adapters.
    pub fn with_lease(token: CancellationToken, lease: Arc<LeaseClock>) -> Self {
        Self {
            source: Source::Token(token),
            lease: Some(lease),
        }
    }

    /// A signal that fires when either alarm is raised (the lock's session
    /// ended, or the lock alone was taken away) or `lease` expires.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn from_alarms(
        session: Arc<SessionEnd>,
        lock: Arc<Alarm>,
        lease: Option<Arc<LeaseClock>>,
    ) -> Self {
        Self {
            source: Source::Alarms { session, lock },
            lease,
        }
    }

    /// A signal that fires as soon as any of `signals` fires (never, for
    /// none). No task is spawned: waiting on it waits on all of them.
    pub fn any(signals: impl IntoIterator<Item = LossSignal>) -> Self {
        let mut members: Vec<LossSignal> = Vec::new();
        for s in signals {
            match &s.source {
                Source::Any(inner) => members.extend(inner.iter().cloned()),
                _ => members.push(s),
            }
        }
        match members.len() {
            0 => Self::never(),
            1 => members.remove(0),
            _ => Self {
                source: Source::Any(members.into()),
                lease: None,
            },
        }
    }

    /// A signal that never fires.
    pub fn never() -> Self {
        Self::default()
    }

    /// True once the lock has been lost.
    pub fn is_lost(&self) -> bool {
        let fired = match &self.source {
            Source::Never => false,
            Source::Token(token) => token.is_cancelled(),
            Source::Alarms { session, lock } => session.is_raised() || lock.is_raised(),
            Source::Any(members) => return members.iter().any(LossSignal::is_lost),
        };
        fired || self.lease.as_ref().is_some_and(|l| l.lease_over())
    }

    /// Why the lock was lost, when the signal knows: the session holding
    /// it ended (and, when known, how: the server terminated it, with its
    /// own words and SQLSTATE; it stopped answering; its connection timed
    /// out), `release_all` took it, or (in lease mode) the server did not
    /// confirm the session before its lease ran out. `None` while the lock
    /// is held, and for a signal that does not know why it fired (a
    /// token's, as the in-memory manager and third-party adapters give).
    /// For [`any`](Self::any), the reason of the first lost member that
    /// has one.
    pub fn reason(&self) -> Option<Cow<'static, str>> {
        match &self.source {
            Source::Any(members) => return members.iter().find_map(Self::reason),
            Source::Alarms { session, .. } if session.is_raised() => {
                return Some(match session.why() {
                    Some(why) => Cow::Owned(why.to_owned()),
                    None => Cow::Borrowed("the session holding the lock ended"),
                });
            }
            Source::Alarms { lock, .. } if lock.is_raised() => {
                return Some(Cow::Borrowed("release_all released the lock"));
            }
            _ => {}
        }
        let expired = self.lease.as_ref().is_some_and(|l| l.lease_over());
        expired.then_some(Cow::Borrowed(
            "the server did not confirm the session before its lease ran out",
        ))
    }

    /// Until when the server cannot have freed the lock for silence, as it
    /// last confirmed the session: in lease mode the end of the lease;
    /// otherwise, for this crate's PostgreSQL manager on a TCP connection,
    /// the end of the server's TCP timeouts (`tcp_user_timeout` and its
    /// keepalives, which the manager sets to about 15 s unless the server
    /// has shorter ones). A session that *ended* frees the lock at once,
    /// whatever this says. `None` when nothing bounds it (no lease, a Unix
    /// socket, an adapter that does not know); for [`any`](Self::any), the
    /// earliest of its members'. A holder that must stop touching the protected resource
    /// before anyone else can take the lock stops by this instant (the
    /// `eventsource` tool sends SIGKILL to its command by then).
    pub fn confirmed_until(&self) -> Option<Instant> {
        match &self.source {
            Source::Any(members) => members.iter().filter_map(Self::confirmed_until).min(),
            _ => self.lease.as_ref().map(|l| l.deadline()),
        }
    }

    /// The deadline of its lease in lease mode (`any`: the earliest).
    pub(crate) fn lease_deadline(&self) -> Option<Instant> {
        let lease = self.lease.as_ref().filter(|l| l.fires());
        match &self.source {
            Source::Any(m) => m.iter().filter_map(Self::lease_deadline).min(),
            _ => lease.map(|l| l.deadline()),
        }
    }

    /// Resolves when the lock is lost; pending forever otherwise.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing; call again to keep waiting.
    pub async fn lost(&self) {
        if let Source::Any(members) = &self.source {
            let waits = members.iter().map(|m| Box::pin(m.lost()));
            futures_util::future::select_all(waits).await;
            return;
        }
        let Some(lease) = self.lease.as_ref().filter(|l| l.fires()) else {
            return self.source_fired().await;
        };
        loop {
            let deadline = lease.deadline();
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = self.source_fired() => return,
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    /// Resolves when the source fires (never for `Any`, which
    /// [`lost`](Self::lost) waits on itself).
    async fn source_fired(&self) {
        match &self.source {
            Source::Token(token) => token.cancelled().await,
            Source::Alarms { session, lock } => {
                tokio::select! {
                    _ = session.raised() => {}
                    _ = lock.raised() => {}
                }
            }
            Source::Never | Source::Any(_) => std::future::pending().await,
        }
    }
}

impl fmt::Debug for LossSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LossSignal")
            .field("lost", &self.is_lost())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_in_the_past_is_lost_without_any_timer() {
        let clock = LeaseClock::new(Instant::now() + Duration::from_secs(3600));
        let signal = LossSignal::with_lease(CancellationToken::new(), clock.clone());
        assert!(!signal.is_lost());
        let past = LeaseClock::new(Instant::now());
        let signal = LossSignal::with_lease(CancellationToken::new(), past);
        assert!(signal.is_lost());
    }

    #[test]
    fn confirmed_until_is_the_lease_and_the_earliest_of_a_set() {
        assert_eq!(LossSignal::never().confirmed_until(), None);
        let (soon, later) = (
            Instant::now() + Duration::from_secs(5),
            Instant::now() + Duration::from_secs(60),
        );
        let a = LossSignal::with_lease(CancellationToken::new(), LeaseClock::new(later));
        let b = LossSignal::with_lease(CancellationToken::new(), LeaseClock::new(soon));
        let c = LossSignal::from_token(CancellationToken::new());
        let until = |s: &LossSignal| s.confirmed_until().unwrap();
        assert!(until(&a) >= later - Duration::from_micros(1));
        let set = LossSignal::any([a, b.clone(), c]);
        assert_eq!(set.confirmed_until(), b.confirmed_until());
        assert!(until(&set) < later - Duration::from_secs(1));
    }

    #[test]
    fn a_lease_only_moves_forward() {
        let later = Instant::now() + Duration::from_secs(60);
        let clock = LeaseClock::new(later);
        clock.extend_to(Instant::now());
        assert!(clock.deadline() >= later - Duration::from_micros(1));
        assert!(!clock.expired());
    }

    #[tokio::test]
    async fn a_lock_is_lost_when_its_session_or_the_lock_alone_is() {
        for session_ends in [true, false] {
            let (session, lock) = (SessionEnd::new(), Alarm::new());
            let signal = LossSignal::from_alarms(session.clone(), lock.clone(), None);
            let clone = signal.clone();
            let waiter = tokio::spawn(async move { clone.lost().await });
            tokio::task::yield_now().await;
            assert!(!signal.is_lost());
            assert!(!waiter.is_finished());
            if session_ends {
                session.raise();
            } else {
                lock.raise();
            }
            waiter.await.unwrap();
            assert!(signal.is_lost());
        }
    }

    #[test]
    fn a_lease_ends_an_alarmed_signal_too() {
        let past = LeaseClock::new(Instant::now());
        let signal = LossSignal::from_alarms(SessionEnd::new(), Alarm::new(), Some(past));
        assert!(signal.is_lost());
        assert!(signal.reason().unwrap().contains("lease"));
    }

    #[test]
    fn the_reason_says_what_ended_the_lock_when_it_is_known() {
        let (session, lock) = (SessionEnd::new(), Alarm::new());
        let alarmed = LossSignal::from_alarms(session.clone(), lock.clone(), None);
        let token = CancellationToken::new();
        let plain = LossSignal::from_token(token.clone());
        let set = LossSignal::any([plain.clone(), alarmed.clone()]);
        assert_eq!((alarmed.reason(), set.reason()), (None, None));
        lock.raise();
        assert_eq!(
            alarmed.reason().as_deref(),
            Some("release_all released the lock")
        );
        session.raise();
        let ended = Some("the session holding the lock ended");
        assert_eq!(alarmed.reason().as_deref(), ended);
        token.cancel();
        assert!(plain.is_lost() && plain.reason().is_none());
        assert_eq!(set.reason().as_deref(), ended, "the member that knows");
    }

    #[test]
    fn the_reason_carries_how_the_session_ended_when_it_was_recorded() {
        let session = SessionEnd::new();
        let signal = LossSignal::from_alarms(session.clone(), Alarm::new(), None);
        session.raise_because("the server ended the session holding the lock (SQLSTATE 57P01)");
        assert!(signal.reason().unwrap().contains("57P01"));
    }
}
