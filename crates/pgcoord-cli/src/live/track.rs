//! What the live views have seen: each session's request for a lock,
//! compared from one listing to the next ([`Tracker`]), and the changes
//! found ([`Event`]) as a line of text or JSON.
//!
//! PostgreSQL has no notification for lock changes and records no grant
//! times: a change is seen at the first listing that shows it, and a lock
//! taken and given back between two listings is not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgcoord::inspect::{AdvisoryLock, LockSession};
use serde::Serialize;

use super::mode;

/// Identifies one row of `pg_locks`: a session's request for one lock in
/// one mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    lock_id: i64,
    int_pair: Option<(i32, i32)>,
    pid: i32,
    mode: String,
}

impl Slot {
    /// The slot of `session` on `lock`.
    pub fn of(lock: &AdvisoryLock, session: &LockSession) -> Self {
        Self {
            lock_id: lock.lock_id,
            int_pair: lock.int_pair,
            pid: session.pid,
            mode: session.mode.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct Seen {
    key: Option<String>,
    fence: Option<i64>,
    session: LockSession,
    /// How many held the lock in shared mode in that listing.
    shared_holders: usize,
    /// When the watch saw the grant happen (not for locks held at its start).
    granted_seen: Option<DateTime<Utc>>,
}

/// What happened to a session's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Let go, or its session ended (listed first: it may cause grants).
    Released,
    /// Stopped waiting without the lock.
    Abandoned,
    /// Stopped waiting while the lock changed hands between two listings:
    /// granted and let go in between, or gave up (the listings cannot tell).
    Left,
    /// A waiter got the lock.
    Granted,
    /// Taken without being seen waiting.
    Acquired,
    /// Held when the watch started.
    Held,
    /// Waiting.
    Waiting,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Released => "released",
            Kind::Abandoned => "abandoned",
            Kind::Left => "left",
            Kind::Granted => "granted",
            Kind::Acquired => "acquired",
            Kind::Held => "held",
            Kind::Waiting => "waiting",
        }
    }
}

/// One change, as a line of text or JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    #[serde(serialize_with = "ser_time")]
    time: DateTime<Utc>,
    event: Kind,
    lock_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    int_pair: Option<(i32, i32)>,
    key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fence: Option<i64>,
    #[serde(flatten)]
    session: LockSession,
    /// For a holder, as in `lock holders --json`: its `backend_start`
    /// (`null` when hidden), a bound PostgreSQL gives for the grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    granted_not_before: Option<Option<DateTime<Utc>>>,
    /// Whether the session holds or wants the lock in shared mode.
    shared: bool,
    /// For a grant in shared mode, how many hold the lock so (this one included).
    #[serde(skip_serializing_if = "Option::is_none")]
    shared_holders: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_secs")]
    waited_seconds: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_secs")]
    held_seconds: Option<Duration>,
}

fn time_text(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn ser_time<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&time_text(t))
}

fn ser_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0),
        None => s.serialize_none(),
    }
}

/// A value as one field: quoted (Rust-style) when it has spaces, quotes,
/// `=`, a backslash or characters that do not print (see
/// [`printable`](crate::printable)), or is empty.
fn field(value: &str) -> String {
    if value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '=')
        || crate::printable::printable(value) != value
    {
        format!("{value:?}")
    } else {
        value.to_owned()
    }
}

fn since(earlier: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<Duration> {
    earlier.map(|t| (now - t).to_std().unwrap_or_default())
}

impl Event {
    /// The text line (without the newline).
    pub fn line(&self) -> String {
        let mut parts = vec![time_text(&self.time), self.event.word().to_owned()];
        if let Some(key) = &self.key {
            parts.push(format!("key={}", field(key)));
        }
        parts.push(match self.int_pair {
            Some((k1, k2)) => format!("pair={k1},{k2}"),
            None => format!("id={}", self.lock_id),
        });
        let s = &self.session;
        parts.push(format!("pid={}", s.pid));
        match (&s.holder_id, &s.application_name) {
            (Some(id), _) => parts.push(format!("holder={}", field(id))),
            (None, Some(app)) if !app.is_empty() => parts.push(format!("app={}", field(app))),
            _ => {}
        }
        if let Some(addr) = &s.client_addr {
            parts.push(format!("client={addr}"));
        }
        parts.push(format!("mode={}", mode::mode_word(s)));
        if let Some(n) = self.shared_holders {
            parts.push(format!("shared_holders={n}"));
        }
        if self.event == Kind::Waiting && !s.blocked_by.is_empty() {
            let pids: Vec<String> = s.blocked_by.iter().map(i32::to_string).collect();
            parts.push(format!("blocked_by={}", pids.join(",")));
        }
        let whole = |d: Duration| {
            crate::duration::format_duration(Duration::from_millis(d.as_millis() as u64))
        };
        if let Some(d) = self.waited_seconds {
            parts.push(format!("waited={}", whole(d)));
        }
        if let Some(d) = self.held_seconds {
            parts.push(format!("held={}", whole(d)));
        }
        if let Some(f) = self.fence {
            parts.push(format!("fence={f}"));
        }
        parts.join(" ")
    }
}

/// The semaphore `NAME` of a slot key `NAME#permit/N`
/// ([`pgcoord::coordination::Semaphore`]'s layout).
fn semaphore_of(key: &str) -> Option<&str> {
    let (name, slot) = key.rsplit_once("#permit/")?;
    (!slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit())).then_some(name)
}

/// `(pid, NAME)` for a session on a slot key `NAME#permit/N`.
fn slot_wait(pid: i32, key: Option<&str>) -> Option<(i32, &str)> {
    key.and_then(semaphore_of).map(|name| (pid, name))
}

/// What the watch (and `lock top`) has seen so far.
#[derive(Debug, Default)]
pub struct Tracker {
    seen: BTreeMap<Slot, Seen>,
    primed: bool,
}

impl Tracker {
    /// When this tracker saw `slot` granted, if it saw the grant happen.
    pub fn granted_seen(&self, slot: &Slot) -> Option<DateTime<Utc>> {
        self.seen.get(slot).and_then(|s| s.granted_seen)
    }

    /// Takes in a new listing, seen at `now`; returns the changes since the
    /// last one (on the first call: what is held and awaited), releases
    /// first, waiters in queue order.
    pub fn update(&mut self, locks: &[AdvisoryLock], now: DateTime<Utc>) -> Vec<Event> {
        let mut events = Vec::new();
        let mut next = BTreeMap::new();
        // The head of a semaphore's queue waits on its slots in turn
        // (`KEY#permit/N`, see docs/primitives.md): a wait that moves from
        // one slot to another is one wait for the semaphore, not a wait
        // abandoned and a new one. Keyed by (pid, semaphore name).
        let on_slots_now: BTreeSet<(i32, &str)> = locks
            .iter()
            .filter_map(|l| Some((l, semaphore_of(l.key.as_deref()?)?)))
            .flat_map(|(l, name)| {
                l.holders
                    .iter()
                    .chain(&l.waiters)
                    .map(move |s| (s.pid, name))
            })
            .collect();
        let waited_on_slots: BTreeSet<(i32, String)> = self
            .seen
            .values()
            .filter(|s| !s.session.granted)
            .filter_map(|s| Some((s.session.pid, semaphore_of(s.key.as_deref()?)?.to_owned())))
            .collect();
        let event = |kind, lock_id, int_pair, seen: &Seen, waited, held| {
            let shared = mode::is_shared(&seen.session);
            let granted = matches!(kind, Kind::Held | Kind::Acquired | Kind::Granted);
            Event {
                time: now,
                event: kind,
                lock_id,
                int_pair,
                key: seen.key.clone(),
                fence: seen.fence,
                session: seen.session.clone(),
                granted_not_before: seen.session.granted.then_some(seen.session.backend_start),
                shared,
                shared_holders: (shared && granted).then_some(seen.shared_holders),
                waited_seconds: waited,
                held_seconds: held,
            }
        };
        for lock in locks {
            for s in lock.holders.iter().chain(lock.waiters.iter()) {
                let slot = Slot::of(lock, s);
                let before = self.seen.remove(&slot);
                let mut seen = Seen {
                    key: lock.key.clone(),
                    fence: lock.fence,
                    session: s.clone(),
                    shared_holders: mode::shared_holders(lock),
                    granted_seen: before.as_ref().and_then(|b| b.granted_seen),
                };
                let change = match (&before, s.granted) {
                    (None, true) if self.primed => Some((Kind::Acquired, None)),
                    (None, true) => Some((Kind::Held, None)),
                    (None, false)
                        if slot_wait(s.pid, lock.key.as_deref()).is_some_and(|(pid, name)| {
                            waited_on_slots.contains(&(pid, name.to_owned()))
                        }) =>
                    {
                        None // moved to another slot of the semaphore
                    }
                    (None, false) => Some((Kind::Waiting, None)),
                    (Some(b), true) if !b.session.granted => {
                        Some((Kind::Granted, since(b.session.since, now)))
                    }
                    _ => None,
                };
                if let Some((kind, waited)) = change {
                    if matches!(kind, Kind::Acquired | Kind::Granted) {
                        seen.granted_seen = Some(now);
                    }
                    events.push(event(
                        kind,
                        lock.lock_id,
                        lock.int_pair,
                        &seen,
                        waited,
                        None,
                    ));
                }
                next.insert(slot, seen);
            }
        }
        let gone_all = std::mem::replace(&mut self.seen, next);
        // Locks a holder let go of since the last listing: a waiter of one
        // that is gone too may have been granted and let go in between.
        let released: std::collections::BTreeSet<i64> = gone_all
            .iter()
            .filter(|(_, g)| g.session.granted)
            .map(|(slot, _)| slot.lock_id)
            .collect();
        for (slot, gone) in gone_all {
            if !gone.session.granted
                && slot_wait(gone.session.pid, gone.key.as_deref())
                    .is_some_and(|w| on_slots_now.contains(&w))
            {
                // Moved to (or got) another slot of the same semaphore.
                continue;
            }
            let (kind, waited, held) = if gone.session.granted {
                (Kind::Released, None, since(gone.granted_seen, now))
            } else if released.contains(&slot.lock_id) {
                (Kind::Left, since(gone.session.since, now), None)
            } else {
                (Kind::Abandoned, since(gone.session.since, now), None)
            };
            events.push(event(
                kind,
                slot.lock_id,
                slot.int_pair,
                &gone,
                waited,
                held,
            ));
        }
        self.primed = true;
        // Stable: within a kind, lock order and queue order stay.
        events.sort_by_key(|e| e.event);
        events
    }
}

#[cfg(test)]
#[path = "track_tests.rs"]
mod tests;
