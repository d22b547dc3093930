//! What `lock top` shows, as lines of text: a header, then a row per
//! session, longest waits first.

use std::cmp::Reverse;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgcoord::inspect::{AdvisoryLock, LockSession};

use super::inspect::{columns, lock_label};
use super::track::{Slot, Tracker};
use crate::duration::format_duration;
use crate::messages::{client_cell, session_name};
use crate::printable::printable;

/// The footer's legend for another role's sessions.
pub const HIDDEN_NOTE: &str = "?: another role's session, whose client address and connection \
time PostgreSQL hides from this role (so a holder's FOR shows -); a role with \
pg_read_all_stats (or pg_monitor) sees them";

/// What the header says besides the locks.
pub struct Header<'a> {
    pub database: &'a str,
    /// The fencing table joined by the listing shown, if any (looked up
    /// again with every session: it may be missing on another server).
    pub fence_table: Option<String>,
    pub interval: Duration,
    /// The last refresh failed: why, and when.
    pub error: Option<String>,
    /// When the rows were listed, if a refresh failed since: their ages
    /// are shown as of then (the header's clock keeps the time).
    pub rows_as_of: Option<DateTime<Utc>>,
    pub interactive: bool,
    /// How many KEYs the view is limited to (0: every lock).
    pub only_keys: usize,
    /// Lines under the table: a key given that is not held but names a
    /// semaphore in use (`crate::semaphore_hint`).
    pub notes: Vec<String>,
}

fn age(since: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (now - since).to_std().unwrap_or_default()
}

fn whole(d: Duration) -> String {
    format_duration(Duration::from_secs(d.as_secs()))
}

/// How long a session has held its lock: known (`None` bound) when the
/// grant was seen, else at most its session's age.
fn held_for(
    lock: &AdvisoryLock,
    s: &LockSession,
    seen: &Tracker,
    now: DateTime<Utc>,
) -> Option<(Duration, bool)> {
    match seen.granted_seen(&Slot::of(lock, s)) {
        Some(t) => Some((age(t, now), false)),
        None => s.backend_start.map(|t| (age(t, now), true)),
    }
}

fn longest_wait(lock: &AdvisoryLock, now: DateTime<Utc>) -> Duration {
    lock.waiters
        .iter()
        .filter_map(|w| w.since.map(|t| age(t, now)))
        .max()
        .unwrap_or_default()
}

/// The view as lines of text: header, column titles, rows; at most `rows`
/// lines and `width` characters each when given.
pub fn frame(
    locks: &[AdvisoryLock],
    seen: &Tracker,
    header: &Header<'_>,
    now: DateTime<Utc>,
    size: Option<(usize, usize)>,
) -> Vec<String> {
    let held: usize = locks.iter().map(|l| l.holders.len()).sum();
    let waiting: usize = locks.iter().map(|l| l.waiters.len()).sum();
    let clock = now;
    let now = header.rows_as_of.unwrap_or(now);
    let mut lines = vec![format!(
        "eventsource lock top - {} - {} UTC - every {}{}",
        header.database,
        clock.format("%H:%M:%S"),
        format_duration(header.interval),
        if header.interactive { " - q quits" } else { "" }
    )];
    let plural = if locks.len() == 1 { "" } else { "s" };
    let of_keys = match header.only_keys {
        0 => String::new(),
        1 => " of the key given".to_owned(),
        n => format!(" of the {n} keys given"),
    };
    let mut summary = format!(
        "{} lock{plural}{of_keys}: {held} held, {waiting} waiting",
        locks.len()
    );
    if let Some(longest) = locks
        .iter()
        .map(|l| longest_wait(l, now))
        .max()
        .filter(|_| waiting > 0)
    {
        summary.push_str(&format!("; longest wait {}", whole(longest)));
    }
    if let Some(table) = &header.fence_table {
        // The schema's name is anyone's who could create one.
        summary.push_str(&format!("; fence tokens from {}", printable(table)));
    }
    lines.push(summary);
    lines.push(header.error.clone().unwrap_or_default());

    let mut order: Vec<&AdvisoryLock> = locks.iter().collect();
    let hold_age = |l: &AdvisoryLock| {
        l.holders
            .iter()
            .filter_map(|h| held_for(l, h, seen, now).map(|(d, _)| d))
            .max()
            .unwrap_or_default()
    };
    // Waited for first, longest wait first, then longest held, then by id.
    order.sort_by_cached_key(|l| {
        (
            Reverse((!l.waiters.is_empty(), longest_wait(l, now), hold_age(l))),
            l.lock_id,
            l.int_pair,
        )
    });
    let fences = header.fence_table.is_some();
    let mut rows = vec![[
        "KEY",
        "STATE",
        "MODE",
        "PID",
        "HOLDER",
        "CLIENT",
        "FOR",
        "BLOCKED BY",
    ]
    .map(str::to_owned)
    .to_vec()];
    if fences {
        rows[0].push("FENCE".into());
    }
    let mut bounded = false;
    for lock in order {
        for (i, s) in lock.holders.iter().chain(lock.waiters.iter()).enumerate() {
            let since = if s.granted {
                match held_for(lock, s, seen, now) {
                    Some((d, true)) => {
                        bounded = true;
                        format!("<={}", whole(d))
                    }
                    Some((d, false)) => whole(d),
                    None => "-".into(),
                }
            } else {
                s.since.map_or("-".into(), |t| whole(age(t, now)))
            };
            let blockers: Vec<String> = s.blocked_by.iter().map(i32::to_string).collect();
            let mut row = vec![
                if i == 0 {
                    lock_label(lock)
                } else {
                    String::new()
                },
                if s.granted { "held" } else { "waiting" }.to_owned(),
                super::mode::mode_word(s).to_owned(),
                s.pid.to_string(),
                session_name(s),
                client_cell(s),
                since,
                blockers.join(","),
            ];
            if fences {
                row.push(match (i, lock.fence) {
                    (0, Some(f)) => f.to_string(),
                    (0, None) => "-".into(),
                    _ => String::new(),
                });
            }
            rows.push(row);
        }
    }
    let mut footer = Vec::new();
    if locks.is_empty() {
        footer.push(match header.only_keys {
            0 => "no advisory locks are held or awaited in this database".to_owned(),
            1 => "the key given is not held, no one waiting".to_owned(),
            _ => "none of the keys given is held or awaited".to_owned(),
        });
    }
    footer.extend(header.notes.iter().cloned());
    if locks
        .iter()
        .flat_map(|l| l.holders.iter().chain(&l.waiters))
        .any(|s| client_cell(s) == "?")
    {
        footer.push(HIDDEN_NOTE.to_owned());
    }
    if bounded {
        footer.push(
            "<=: held when top started (or reached this server); at most the age of \
             the holder's session (PostgreSQL does not record when a lock was granted)"
                .to_owned(),
        );
    }
    let mut table = if locks.is_empty() {
        Vec::new()
    } else {
        columns(&rows)
    };
    if let Some((_, height)) = size {
        let room = height.saturating_sub(lines.len() + footer.len());
        if table.len() > room {
            let hidden = table.len() - room.saturating_sub(1);
            table.truncate(room.saturating_sub(1));
            table.push(format!(
                "... {hidden} more rows (a taller window shows more)"
            ));
        }
    }
    lines.extend(table);
    lines.extend(footer);
    if let Some((width, _)) = size {
        for line in &mut lines {
            if line.chars().count() > width {
                *line = line.chars().take(width).collect();
            }
        }
    }
    lines
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
