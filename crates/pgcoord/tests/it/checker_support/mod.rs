//! What the multi-process checkers share: one clock for every process,
//! a seeded PRNG, the section log's format and its verdict.
//!
//! A section line is `worker key enter exit loss [outcome]` (nanoseconds
//! since the epoch, `-` for no loss); `# worker errors N` lines count a
//! worker's failed acquisitions.
#![allow(dead_code)] // each checker uses its part

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the epoch: one clock for every process of the machine.
pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A small PRNG (xorshift), seeded per worker.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Debug, Clone)]
pub struct Section {
    pub worker: String,
    pub enter: u128,
    pub exit: u128,
    pub loss: Option<u128>,
}

#[derive(Debug, Default)]
pub struct Verdict {
    pub sections: usize,
    pub keys: usize,
    pub losses: usize,
    /// Overlaps where the earlier holder had been told before the later entered.
    pub told_before: usize,
    /// Overlaps where one holder was told, but only after both were in:
    /// the earlier one after the later entered, or the later one within its
    /// own section (the window no lock without fencing closes).
    pub told_after: Vec<String>,
    /// Overlaps where neither holder was told in time: broken exclusion.
    pub violations: Vec<String>,
    pub errors: u64,
}

pub fn check(log: &str) -> Verdict {
    let mut by_key: HashMap<String, Vec<Section>> = HashMap::new();
    let mut v = Verdict::default();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f[0] == "#" {
            v.errors += f[3].parse::<u64>().unwrap();
            continue;
        }
        let s = Section {
            worker: f[0].to_owned(),
            enter: f[2].parse().unwrap(),
            exit: f[3].parse().unwrap(),
            loss: (f[4] != "-").then(|| f[4].parse().unwrap()),
        };
        assert!(s.enter <= s.exit, "{line}");
        v.sections += 1;
        v.losses += usize::from(s.loss.is_some());
        by_key.entry(f[1].to_owned()).or_default().push(s);
    }
    v.keys = by_key.len();
    for (key, mut list) in by_key {
        list.sort_by_key(|s| s.enter);
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if b.enter >= a.exit {
                    break; // sorted by enter: no later one overlaps a either
                }
                let what = format!("{key}: {} {a:?} overlaps {} {b:?}", a.worker, b.worker);
                match (a.loss, b.loss) {
                    (Some(t), _) if t <= b.enter => v.told_before += 1,
                    (Some(_), _) => v.told_after.push(what),
                    // The later one entered with a lock already lost, and
                    // was told within its section: its session was granted
                    // the lock and terminated a moment later, and the
                    // client saw the grant only after the server had
                    // released it. The same no-fencing window, mirrored.
                    (None, Some(t)) if t <= b.exit => v.told_after.push(what),
                    (None, _) => v.violations.push(what),
                }
            }
        }
    }
    v
}

pub fn stress() -> bool {
    std::env::var("EVENTSOURCE_STRESS").is_ok_and(|v| v == "1")
}

pub fn env_or(name: &str, small: u64, large: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if stress() { large } else { small })
}
