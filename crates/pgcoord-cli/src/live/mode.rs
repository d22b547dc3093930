//! How a session holds or wants an advisory lock: exclusive
//! (`pg_advisory_lock`) or shared (`pg_advisory_lock_shared`: any number of
//! sessions may hold a lock shared at once, and none exclusive meanwhile),
//! as `lock holders` shows it in text, in JSON and in `--watch` events.

use pgcoord::inspect::{AdvisoryLock, LockSession};

/// `pg_locks.mode` of a shared advisory lock.
const SHARE_LOCK: &str = "ShareLock";
/// `pg_locks.mode` of an exclusive advisory lock.
const EXCLUSIVE_LOCK: &str = "ExclusiveLock";

/// True for a session that holds or wants the lock in shared mode.
pub fn is_shared(s: &LockSession) -> bool {
    s.mode == SHARE_LOCK
}

/// The mode as a word: `exclusive`, `shared`, else as `pg_locks` names it.
pub fn mode_word(s: &LockSession) -> &str {
    match s.mode.as_str() {
        EXCLUSIVE_LOCK => "exclusive",
        SHARE_LOCK => "shared",
        other => other,
    }
}

/// How many sessions hold `lock` in shared mode.
pub fn shared_holders(lock: &AdvisoryLock) -> usize {
    lock.holders.iter().filter(|h| is_shared(h)).count()
}

/// The MODE cell of the holders table: the word, and for a holder in
/// shared mode how many hold the lock so, e.g. `shared (2 holders)`.
pub fn mode_cell(lock: &AdvisoryLock, s: &LockSession) -> String {
    if !(s.granted && is_shared(s)) {
        return mode_word(s).to_owned();
    }
    match shared_holders(lock) {
        1 => "shared (1 holder)".to_owned(),
        n => format!("shared ({n} holders)"),
    }
}

/// `locks` as `lock holders --json` prints them: the library's fields, and
/// `shared` (true or false) on each session, `granted_not_before` on each
/// holder (its `backend_start`: PostgreSQL records no grant time, and a
/// holder's `since` is its last activity, which a lock manager's liveness
/// statement keeps at "just now") and `shared_holders` on each lock held
/// in shared mode.
pub fn to_json(locks: &[AdvisoryLock]) -> serde_json::Result<serde_json::Value> {
    let mut out = Vec::with_capacity(locks.len());
    for lock in locks {
        let mut value = serde_json::to_value(lock)?;
        let object = value.as_object_mut().expect("a lock is an object");
        for (field, sessions) in [("holders", &lock.holders), ("waiters", &lock.waiters)] {
            let Some(list) = object.get_mut(field).and_then(|v| v.as_array_mut()) else {
                continue;
            };
            for (entry, s) in list.iter_mut().zip(sessions) {
                if let Some(entry) = entry.as_object_mut() {
                    entry.insert("shared".into(), is_shared(s).into());
                    if s.granted {
                        entry.insert(
                            "granted_not_before".into(),
                            serde_json::to_value(s.backend_start)?,
                        );
                    }
                }
            }
        }
        let shared = shared_holders(lock);
        if shared > 0 {
            object.insert("shared_holders".into(), shared.into());
        }
        out.push(value);
    }
    Ok(serde_json::Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(pid: i32, mode: &str, granted: bool) -> LockSession {
        LockSession {
            pid,
            mode: mode.into(),
            granted,
            application_name: None,
            holder_id: None,
            client_addr: None,
            backend_start: None,
            since: None,
            blocked_by: Vec::new(),
        }
    }

    fn lock(holders: Vec<LockSession>, waiters: Vec<LockSession>) -> AdvisoryLock {
        AdvisoryLock {
            lock_id: 7,
            int_pair: None,
            key: Some("k".into()),
            fence: None,
            holders,
            waiters,
        }
    }

    #[test]
    fn shared_holders_are_counted_and_waiters_show_their_mode() {
        let shared = lock(
            vec![session(1, SHARE_LOCK, true), session(2, SHARE_LOCK, true)],
            vec![session(3, EXCLUSIVE_LOCK, false)],
        );
        assert_eq!(shared_holders(&shared), 2);
        assert_eq!(mode_cell(&shared, &shared.holders[0]), "shared (2 holders)");
        assert_eq!(mode_cell(&shared, &shared.waiters[0]), "exclusive");
        let one = lock(vec![session(1, SHARE_LOCK, true)], vec![]);
        assert_eq!(mode_cell(&one, &one.holders[0]), "shared (1 holder)");
        let exclusive = lock(
            vec![session(1, EXCLUSIVE_LOCK, true)],
            vec![session(2, SHARE_LOCK, false)],
        );
        assert_eq!(shared_holders(&exclusive), 0);
        assert_eq!(mode_cell(&exclusive, &exclusive.holders[0]), "exclusive");
        assert_eq!(mode_cell(&exclusive, &exclusive.waiters[0]), "shared");
        assert_eq!(
            mode_word(&session(1, "RowExclusiveLock", true)),
            "RowExclusiveLock"
        );
    }

    #[test]
    fn json_adds_the_mode_flag_and_the_shared_count() {
        let locks = [
            lock(
                vec![session(1, SHARE_LOCK, true), session(2, SHARE_LOCK, true)],
                vec![session(3, EXCLUSIVE_LOCK, false)],
            ),
            lock(vec![session(4, EXCLUSIVE_LOCK, true)], vec![]),
        ];
        let json = to_json(&locks).unwrap();
        assert_eq!(json[0]["shared_holders"], 2);
        assert_eq!(json[0]["holders"][1]["shared"], true);
        assert_eq!(json[0]["holders"][1]["mode"], SHARE_LOCK);
        assert_eq!(json[0]["waiters"][0]["shared"], false);
        assert!(json[1].get("shared_holders").is_none());
        assert_eq!(json[1]["holders"][0]["shared"], false);
        assert_eq!(json[1]["key"], "k");
    }

    #[test]
    fn json_bounds_a_holders_grant_by_its_session_start() {
        use chrono::TimeZone;
        let start = chrono::Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
        let mut holder = session(1, EXCLUSIVE_LOCK, true);
        holder.backend_start = Some(start);
        holder.since = Some(start + chrono::Duration::hours(1));
        let mut waiter = session(2, EXCLUSIVE_LOCK, false);
        waiter.backend_start = Some(start);
        let hidden = session(3, SHARE_LOCK, true);
        let json =
            to_json(&[lock(vec![holder], vec![waiter]), lock(vec![hidden], vec![])]).unwrap();
        assert_eq!(
            json[0]["holders"][0]["granted_not_before"],
            "2026-11-30T08:00:00Z"
        );
        // `since` keeps its meaning (the session's last activity).
        assert_eq!(json[0]["holders"][0]["since"], "2026-11-30T09:00:00Z");
        assert!(json[0]["waiters"][0].get("granted_not_before").is_none());
        assert!(json[1]["holders"][0]["granted_not_before"].is_null());
    }
}
