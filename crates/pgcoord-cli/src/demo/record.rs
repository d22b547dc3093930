//! The demo's shared record of critical sections, and its analysis.
//!
//! Every worker appends one line per event to the same file, opened in
//! append mode (each line is a single `write`, so lines never interleave):
//! `T_NS WORKER EVENT KEY`, where `T_NS` is `CLOCK_MONOTONIC` in
//! nanoseconds (one clock for every process of the machine) and EVENT is
//! `wait` (before asking for the lock), `enter` (after it was granted),
//! `exit` (before releasing it) or `killed` (written by the demo just before
//! it sends SIGKILL to a worker inside its critical section).
//!
//! Because `enter` is stamped after the grant and `exit` before the release,
//! the sections of one key can only overlap in the record if two workers
//! really held the key at once.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

/// One line of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `CLOCK_MONOTONIC`, nanoseconds.
    pub t: u64,
    /// The worker the event is about.
    pub worker: u32,
    /// What happened.
    pub kind: Kind,
    /// The lock key.
    pub key: String,
}

/// Record event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    // Order matters: at equal timestamps a section ends before the next begins.
    /// Left the critical section, about to release.
    Exit,
    /// Killed inside the critical section.
    Killed,
    /// Asking for the lock.
    Wait,
    /// Granted, inside the critical section.
    Enter,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Exit => "exit",
            Kind::Killed => "killed",
            Kind::Wait => "wait",
            Kind::Enter => "enter",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "exit" => Kind::Exit,
            "killed" => Kind::Killed,
            "wait" => Kind::Wait,
            "enter" => Kind::Enter,
            _ => return None,
        })
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
pub fn now_ns() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always available");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Appends one event line, stamped now, in a single write; returns the stamp.
pub fn append(file: &mut impl Write, worker: u32, kind: Kind, key: &str) -> io::Result<u64> {
    let t = now_ns();
    let line = format!("{t} {worker} {} {key}\n", kind.as_str());
    file.write_all(line.as_bytes())?;
    Ok(t)
}

/// Parses a record; malformed lines (a worker killed mid-write) are skipped
/// and counted.
pub fn parse(text: &str) -> (Vec<Event>, usize) {
    let mut events = Vec::new();
    let mut bad = 0;
    for line in text.lines() {
        let mut parts = line.splitn(4, ' ');
        let parsed = (|| {
            Some(Event {
                t: parts.next()?.parse().ok()?,
                worker: parts.next()?.parse().ok()?,
                kind: Kind::parse(parts.next()?)?,
                key: parts.next()?.to_owned(),
            })
        })();
        match parsed {
            Some(e) => events.push(e),
            None => bad += 1,
        }
    }
    (events, bad)
}

/// Two workers inside one key's critical section at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The key.
    pub key: String,
    /// The worker already inside.
    pub inside: u32,
    /// The worker that entered too.
    pub entered: u32,
    /// When the second one entered.
    pub t: u64,
}

/// What happened after the demo killed a holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    /// The killed worker.
    pub victim: u32,
    /// The key it held.
    pub key: String,
    /// The worker that entered next, and how long after the kill (ns).
    pub next: Option<(u32, u64)>,
}

/// The summary of a record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Critical sections entered.
    pub acquisitions: usize,
    /// Sections entered per worker.
    pub per_worker: BTreeMap<u32, usize>,
    /// Overlapping sections (must be empty).
    pub overlaps: Vec<Overlap>,
    /// Hand-over latencies (ns): from a holder's exit to the entry of a
    /// worker that was already waiting.
    pub handovers: Vec<u64>,
    /// The kill, if there was one.
    pub takeover: Option<Takeover>,
}

/// Checks the record for overlaps and measures hand-overs.
pub fn analyze(mut events: Vec<Event>) -> Analysis {
    events.sort_by_key(|e| (e.t, e.kind));
    let mut out = Analysis::default();
    // Per key: who is inside; when and by whom it was last left.
    let mut inside: HashMap<&str, u32> = HashMap::new();
    let mut left: HashMap<&str, (u64, bool)> = HashMap::new();
    let mut waiting_since: HashMap<u32, u64> = HashMap::new();
    for e in &events {
        let key = e.key.as_str();
        match e.kind {
            Kind::Wait => {
                waiting_since.insert(e.worker, e.t);
            }
            Kind::Enter => {
                out.acquisitions += 1;
                *out.per_worker.entry(e.worker).or_default() += 1;
                if let Some(&other) = inside.get(key) {
                    out.overlaps.push(Overlap {
                        key: key.to_owned(),
                        inside: other,
                        entered: e.worker,
                        t: e.t,
                    });
                }
                if let Some(&(left_at, by_kill)) = left.get(key) {
                    let waited_before = waiting_since.get(&e.worker).is_some_and(|&w| w <= left_at);
                    if by_kill {
                        if let Some(t) = out
                            .takeover
                            .as_mut()
                            .filter(|t| t.key == key && t.next.is_none())
                        {
                            t.next = Some((e.worker, e.t - left_at));
                        }
                    } else if waited_before {
                        out.handovers.push(e.t - left_at);
                    }
                }
                left.remove(key);
                inside.insert(key, e.worker);
            }
            Kind::Exit | Kind::Killed => {
                if inside.get(key) == Some(&e.worker) {
                    inside.remove(key);
                }
                let by_kill = e.kind == Kind::Killed;
                left.insert(key, (e.t, by_kill));
                if by_kill {
                    out.takeover = Some(Takeover {
                        victim: e.worker,
                        key: key.to_owned(),
                        next: None,
                    });
                }
            }
        }
    }
    out.handovers.sort_unstable();
    out
}

/// The nearest-rank percentile `p` (0–100) of sorted values.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: u64, worker: u32, kind: Kind, key: &str) -> Event {
        Event {
            t,
            worker,
            kind,
            key: key.into(),
        }
    }

    #[test]
    fn lines_round_trip() {
        let mut buf = Vec::new();
        let t = append(&mut buf, 3, Kind::Enter, "demo:x:k1").unwrap();
        let text = String::from_utf8(buf).unwrap() + "garbage line\n12 1 enter";
        let (events, bad) = parse(&text);
        assert_eq!(events, vec![ev(t, 3, Kind::Enter, "demo:x:k1")]);
        assert_eq!(bad, 2);
    }

    #[test]
    fn disjoint_sections_have_no_overlap_and_handovers_count_waiters_only() {
        let events = vec![
            ev(0, 1, Kind::Wait, "a"),
            ev(10, 1, Kind::Enter, "a"),
            ev(15, 2, Kind::Wait, "a"),
            ev(20, 1, Kind::Exit, "a"),
            ev(23, 2, Kind::Enter, "a"),
            ev(30, 2, Kind::Exit, "a"),
            // Worker 3 asks only after the release: no hand-over.
            ev(40, 3, Kind::Wait, "a"),
            ev(41, 3, Kind::Enter, "a"),
            ev(50, 3, Kind::Exit, "a"),
        ];
        let a = analyze(events);
        assert_eq!(a.acquisitions, 3);
        assert!(a.overlaps.is_empty());
        assert_eq!(a.handovers, vec![3]);
        assert_eq!(a.per_worker.get(&1), Some(&1));
    }

    #[test]
    fn an_entry_while_another_is_inside_is_an_overlap() {
        let events = vec![
            ev(10, 1, Kind::Enter, "a"),
            ev(12, 2, Kind::Enter, "b"),
            ev(15, 3, Kind::Enter, "a"),
            ev(20, 1, Kind::Exit, "a"),
        ];
        let a = analyze(events);
        assert_eq!(
            a.overlaps,
            vec![Overlap {
                key: "a".into(),
                inside: 1,
                entered: 3,
                t: 15
            }]
        );
    }

    #[test]
    fn same_timestamp_exit_then_enter_is_no_overlap() {
        let events = vec![
            ev(10, 2, Kind::Enter, "a"),
            ev(20, 1, Kind::Wait, "a"),
            ev(30, 1, Kind::Enter, "a"),
            ev(30, 2, Kind::Exit, "a"),
        ];
        assert!(analyze(events).overlaps.is_empty());
    }

    #[test]
    fn a_section_never_left_blocks_everyone_after_it() {
        let events = vec![ev(10, 1, Kind::Enter, "a"), ev(50, 2, Kind::Enter, "a")];
        assert_eq!(analyze(events).overlaps.len(), 1);
    }

    #[test]
    fn kill_ends_the_section_and_measures_the_takeover() {
        let events = vec![
            ev(10, 1, Kind::Enter, "a"),
            ev(12, 2, Kind::Wait, "a"),
            ev(100, 1, Kind::Killed, "a"),
            ev(104, 2, Kind::Enter, "a"),
        ];
        let a = analyze(events);
        assert!(a.overlaps.is_empty());
        assert!(
            a.handovers.is_empty(),
            "the takeover is reported on its own"
        );
        assert_eq!(
            a.takeover,
            Some(Takeover {
                victim: 1,
                key: "a".into(),
                next: Some((2, 4))
            })
        );
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
