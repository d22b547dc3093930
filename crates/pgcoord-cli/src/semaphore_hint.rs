//! `lock holders KEY` when KEY is the name of a semaphore (`lock run
//! --permits N KEY`): KEY's own lock is never taken, its permits are the
//! locks of `KEY#permit/0` ... `KEY#permit/N-1` and its queue that of
//! `KEY#turnstile` (docs/primitives.md, "Semaphores"). "Not held, no one
//! waiting" alone would mislead while permits are held and runs wait, so
//! the listing says so and names the keys that list them.

use pgcoord::inspect::AdvisoryLock;

use crate::live::inspect::Inspector;
use crate::printable::printable;

/// The lines for the keys of `asked` that `locks` (their listing) shows
/// neither held nor awaited but that name a semaphore in use ([`hint`]).
pub async fn notes(
    inspector: &Inspector,
    asked: &[String],
    locks: &[AdvisoryLock],
) -> pgcoord::Result<Vec<String>> {
    let mut notes = Vec::new();
    for key in asked {
        let id = pgcoord::lock_id_for_key(key);
        if locks
            .iter()
            .any(|l| l.lock_id == id && l.int_pair.is_none())
        {
            continue;
        }
        let found = inspector.snapshot_keys(&keys_of(key)).await?;
        notes.extend(hint(key, &found));
    }
    Ok(notes)
}

/// The permit slots looked at: N is not recorded anywhere, and slots are
/// taken from 0 up, so the first ones say whether a semaphore is in use.
pub const SLOTS_LOOKED_AT: usize = 256;

/// The keys of semaphore `name` looked at: its turnstile, then its first
/// [`SLOTS_LOOKED_AT`] permit slots.
pub fn keys_of(name: &str) -> Vec<String> {
    std::iter::once(format!("{name}#turnstile"))
        .chain((0..SLOTS_LOOKED_AT).map(|i| format!("{name}#permit/{i}")))
        .collect()
}

/// The line saying that semaphore `name` is in use, from a listing of
/// [`keys_of`]`(name)` (keys named); `None` when none of its locks is held
/// or awaited.
pub fn hint(name: &str, locks: &[AdvisoryLock]) -> Option<String> {
    let ids: Vec<(i64, String)> = keys_of(name)
        .into_iter()
        .map(|k| (pgcoord::lock_id_for_key(&k), k))
        .collect();
    let of = |l: &AdvisoryLock| {
        ids.iter()
            .find(|(id, _)| *id == l.lock_id && l.int_pair.is_none())
            .map(|(_, k)| k.clone())
    };
    let is_turnstile = |l: &AdvisoryLock| of(l).is_some_and(|k| k.ends_with("#turnstile"));
    // The turnstile's holder is the queue's head: a run waiting for a
    // permit too, which probes the slots (and slot N, past the last, to
    // tell a full semaphore from another count): a slot it holds for a
    // moment is no permit.
    let head: Vec<i32> = locks
        .iter()
        .filter(|l| is_turnstile(l))
        .flat_map(|l| l.holders.iter().map(|s| s.pid))
        .collect();
    let mut held = Vec::new();
    let mut waiting = 0;
    let mut keys = Vec::new();
    for lock in locks {
        let Some(key) = of(lock) else { continue };
        if is_turnstile(lock) {
            waiting += lock.holders.len() + lock.waiters.len();
        } else if lock.holders.iter().any(|s| !head.contains(&s.pid)) {
            // A head waiting on a slot in turn is counted at the turnstile.
            held.push(key.clone());
        } else if lock.waiters.is_empty() {
            // Only the head's probe: not a key that lists the semaphore.
            continue;
        }
        keys.push(key);
    }
    if keys.is_empty() {
        return None;
    }
    keys.sort_by_key(|k| (k.ends_with("#turnstile"), slot_of(k)));
    let quoted: Vec<String> = keys.iter().map(|k| shell_quoted(k)).collect();
    Some(format!(
        "{}: as a semaphore (`lock run --permits`): {} permit{} held, {} run{} waiting; \
         `eventsource lock holders {}` lists them",
        printable(name),
        held.len(),
        if held.len() == 1 { "" } else { "s" },
        waiting,
        if waiting == 1 { "" } else { "s" },
        quoted.join(" ")
    ))
}

fn slot_of(key: &str) -> usize {
    key.rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// `key` quoted for a POSIX shell (`'…'`, a `'` as `'\''`), escaped where
/// it does not print.
fn shell_quoted(key: &str) -> String {
    format!("'{}'", printable(key).replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(key: &str, holders: &[i32], waiters: &[i32]) -> AdvisoryLock {
        let session = |pid: &i32, granted| pgcoord::inspect::LockSession {
            pid: *pid,
            mode: "ExclusiveLock".into(),
            granted,
            application_name: None,
            holder_id: None,
            client_addr: None,
            backend_start: None,
            since: None,
            blocked_by: vec![],
        };
        AdvisoryLock {
            lock_id: pgcoord::lock_id_for_key(key),
            int_pair: None,
            key: Some(key.into()),
            fence: None,
            holders: holders.iter().map(|p| session(p, true)).collect(),
            waiters: waiters.iter().map(|p| session(p, false)).collect(),
        }
    }

    #[test]
    fn held_permits_and_queued_runs_are_counted_and_named() {
        assert_eq!(hint("sem", &[]), None);
        // 9 is the head (it holds the turnstile): it waits on slot 1 in
        // turn and probes slot 2, past the last; 8 queues behind it.
        let locks = [
            lock("sem#turnstile", &[9], &[8]),
            lock("sem#permit/1", &[2], &[9]),
            lock("sem#permit/0", &[1], &[]),
            lock("sem#permit/2", &[9], &[]),
            lock("other", &[3], &[]),
        ];
        assert_eq!(
            hint("sem", &locks).unwrap(),
            "sem: as a semaphore (`lock run --permits`): 2 permits held, 2 runs waiting; \
             `eventsource lock holders 'sem#permit/0' 'sem#permit/1' 'sem#turnstile'` \
             lists them"
        );
    }
}
