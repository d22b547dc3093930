//! `eventsource lock holders`: who holds which lock, who waits.

use chrono::{DateTime, Utc};
use eventsource::adapters::postgres::{AdvisoryLock, LockSession};

use crate::cli::HoldersArgs;
use crate::db::{self, Database};
use crate::key::printable_key;
use crate::messages::session_name;
use crate::{exit, report};

/// Runs `lock holders`; returns the exit code.
pub async fn holders(args: HoldersArgs, db: Database) -> i32 {
    if let Some(long) = args
        .keys
        .iter()
        .find(|k| k.len() > eventsource::MAX_KEY_LEN)
    {
        report!(
            "a key is {} bytes long; lock keys are at most {} bytes",
            long.len(),
            eventsource::MAX_KEY_LEN
        );
        return exit::USAGE;
    }
    // Through a manager: its session has the URL's TLS settings.
    let manager = db.manager_builder().build();
    let keys: Vec<&str> = args.keys.iter().map(String::as_str).collect();
    let locks = match manager.holders(&keys).await {
        Ok(l) => l,
        Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
    };
    let out = if args.json {
        match serde_json::to_string_pretty(&locks) {
            Ok(mut s) => {
                s.push('\n');
                s
            }
            Err(e) => {
                report!("cannot encode JSON: {e}");
                return exit::SOFTWARE;
            }
        }
    } else {
        render_table(&locks, &args.keys, Utc::now())
    };
    match crate::print_stdout(&out) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

fn since_text(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match since {
        None => "-".to_owned(),
        Some(t) => {
            let age = (now - t).to_std().unwrap_or_default();
            format!(
                "{} ({} ago)",
                t.format("%Y-%m-%dT%H:%M:%SZ"),
                crate::duration::format_duration(std::time::Duration::from_secs(age.as_secs()))
            )
        }
    }
}

fn row(lock_cells: [String; 2], s: &LockSession, now: DateTime<Utc>) -> [String; 8] {
    let [id, key] = lock_cells;
    [
        id,
        key,
        if s.granted { "held" } else { "waiting" }.to_owned(),
        s.mode.clone(),
        s.pid.to_string(),
        session_name(s),
        s.client_addr.clone().unwrap_or_else(|| "-".to_owned()),
        since_text(s.since, now),
    ]
}

/// The text table: one row per session, holders first, then waiters in
/// queue order; the lock id and key only on a lock's first row.
pub fn render_table(locks: &[AdvisoryLock], asked: &[String], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    if locks.is_empty() {
        if asked.is_empty() {
            out.push_str("no advisory locks are held or awaited in this database\n");
        }
    } else {
        let header = [
            "LOCK ID", "KEY", "STATE", "MODE", "PID", "HOLDER", "CLIENT", "SINCE",
        ]
        .map(str::to_owned);
        let mut rows = vec![header];
        for lock in locks {
            let mut first = true;
            for s in lock.holders.iter().chain(lock.waiters.iter()) {
                let cells = if first {
                    [
                        match lock.int_pair {
                            Some((k1, k2)) => format!("({k1},{k2})"),
                            None => lock.lock_id.to_string(),
                        },
                        lock.key
                            .as_deref()
                            .map(printable_key)
                            .unwrap_or_else(|| "-".into()),
                    ]
                } else {
                    [String::new(), String::new()]
                };
                first = false;
                rows.push(row(cells, s, now));
            }
        }
        let mut widths = [0usize; 8];
        for r in &rows {
            for (w, cell) in widths.iter_mut().zip(r.iter()) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for r in &rows {
            let mut line = String::new();
            for (i, cell) in r.iter().enumerate() {
                if i + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    let pad = widths[i] - cell.chars().count() + 2;
                    line.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if locks.iter().any(|l| l.int_pair.is_some()) {
            out.push_str(
                "(K1,K2): a two-int advisory lock, pg_advisory_lock(int, int); \
                 eventsource takes bigint ones (LOCK ID)\n",
            );
        }
    }
    for key in asked {
        let id = eventsource::lock_id_for_key(key);
        if !locks
            .iter()
            .any(|l| l.lock_id == id && l.int_pair.is_none())
        {
            out.push_str(&format!(
                "{} (id {id}): not held, no one waiting\n",
                printable_key(key)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn session(pid: i32, app: &str, granted: bool, secs: u32) -> LockSession {
        LockSession {
            pid,
            mode: "ExclusiveLock".into(),
            granted,
            application_name: Some(app.into()),
            holder_id: app.strip_prefix("eventsource/").map(str::to_owned),
            client_addr: if granted {
                Some("127.0.0.1".into())
            } else {
                None
            },
            backend_start: None,
            since: Some(Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, secs).unwrap()),
        }
    }

    #[test]
    fn table_lists_holders_then_waiters() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let locks = vec![AdvisoryLock {
            lock_id: 1068468761257547166,
            int_pair: None,
            key: Some("alpha".into()),
            holders: vec![session(10, "eventsource/host-a:1", true, 0)],
            waiters: vec![session(11, "psql", false, 30)],
        }];
        let text = render_table(&locks, &["alpha".into(), "beta".into()], now);
        let expected = "\
LOCK ID              KEY    STATE    MODE           PID  HOLDER              CLIENT     SINCE
1068468761257547166  alpha  held     ExclusiveLock  10   host-a:1            127.0.0.1  2026-11-30T09:00:00Z (3m ago)
                            waiting  ExclusiveLock  11   application \"psql\"  -          2026-11-30T09:00:30Z (2m30s ago)
beta (id 8380746901480884457): not held, no one waiting
";
        assert_eq!(text, expected);
    }

    #[test]
    fn empty_listing_says_so() {
        let now = Utc::now();
        assert_eq!(
            render_table(&[], &[], now),
            "no advisory locks are held or awaited in this database\n"
        );
    }
}
