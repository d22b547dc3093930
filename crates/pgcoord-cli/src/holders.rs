//! `eventsource lock holders`: who holds which lock, who waits (`--watch`
//! hands over to [`crate::live::watch`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgcoord::inspect::{AdvisoryLock, HoldersQuery, LockSession};

use crate::cli::HoldersArgs;
use crate::db::{self, Database};
use crate::live::inspect::{columns, Inspector, KeyNames};
use crate::live::mode;
use crate::messages::{client_cell, session_name};
use crate::printable::{printable, shortened, SHOWN_KEY_WIDTH};
use crate::{exit, report};

/// Runs `lock holders` (and `--watch`); returns the exit code.
pub async fn holders(args: HoldersArgs, db: Database) -> i32 {
    let names = match KeyNames::from_keys(args.keys.iter().cloned()) {
        Ok(n) => n,
        Err(code) => return code,
    };
    let inspector = match Inspector::open(&db, HoldersQuery::keys(&args.keys)).await {
        Ok(i) => i,
        Err(code) => return code,
    };
    if args.watch.watch {
        return crate::live::watch::watch(&db, &inspector, &names, args.json, args.watch.interval)
            .await;
    }
    let locks = match inspector.snapshot(&names).await {
        Ok(l) => l,
        Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
    };
    let out = if args.json {
        match mode::to_json(&locks).and_then(|v| serde_json::to_string_pretty(&v)) {
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
        let mut out = render_table(&locks, &args.keys, inspector.fences_joined(), Utc::now());
        // A key not held may name a semaphore in use (`--permits`).
        match crate::semaphore_hint::notes(&inspector, &args.keys, &locks).await {
            Ok(notes) => notes.iter().for_each(|n| {
                out.push_str(n);
                out.push('\n');
            }),
            Err(e) => return db::fail("cannot list lock holders", Some(&db), &e),
        }
        out
    };
    match crate::print_stdout(&out) {
        Ok(()) => 0,
        Err(code) => code,
    }
}

fn age_text(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let age = (now - t).to_std().unwrap_or_default();
    crate::duration::format_duration(Duration::from_secs(age.as_secs()))
}

/// The SINCE cell. A waiter's is when it started waiting. A holder's is a
/// bound: PostgreSQL records no grant time, and the session's last
/// activity (`since`) is no help, since a lock manager's liveness
/// statement moves it twice a second; the lock was granted at or after the
/// session connected (`backend_start`), so `>=` that and `<=` its age.
fn since_text(s: &LockSession, now: DateTime<Utc>) -> String {
    let stamp = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    if s.granted {
        match s.backend_start {
            None => "-".to_owned(),
            Some(t) => format!(">={} (<={} ago)", stamp(t), age_text(t, now)),
        }
    } else {
        match s.since {
            None => "-".to_owned(),
            Some(t) => format!("{} ({} ago)", stamp(t), age_text(t, now)),
        }
    }
}

/// The footnote under a table with a holder's bound in SINCE.
pub const BOUND_NOTE: &str = ">=: a holder's lock was granted at or after this time, when its \
session connected (PostgreSQL does not record when a lock was granted)";

fn row(
    lock_cells: Vec<String>,
    lock: &AdvisoryLock,
    s: &LockSession,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut cells = lock_cells;
    cells.extend([
        if s.granted { "held" } else { "waiting" }.to_owned(),
        mode::mode_cell(lock, s),
        s.pid.to_string(),
        session_name(s),
        client_cell(s),
        since_text(s, now),
    ]);
    cells
}

/// The text table: one row per session, holders first, then waiters in
/// queue order; the lock id, key (and fence token, with `fences`) only on a
/// lock's first row; MODE `exclusive` or `shared`, with the number of
/// shared holders on theirs; SINCE a bound for a holder, explained under
/// the table.
pub fn render_table(
    locks: &[AdvisoryLock],
    asked: &[String],
    fences: bool,
    now: DateTime<Utc>,
) -> String {
    let mut out = String::new();
    if locks.is_empty() {
        if asked.is_empty() {
            out.push_str("no advisory locks are held or awaited in this database\n");
        }
    } else {
        let mut header: Vec<String> = ["LOCK ID", "KEY"].map(str::to_owned).to_vec();
        if fences {
            header.push("FENCE".into());
        }
        header.extend(["STATE", "MODE", "PID", "HOLDER", "CLIENT", "SINCE"].map(str::to_owned));
        let mut rows = vec![header];
        for lock in locks {
            let mut first = true;
            for s in lock.holders.iter().chain(lock.waiters.iter()) {
                let mut cells = Vec::new();
                if first {
                    cells.push(match lock.int_pair {
                        Some((k1, k2)) => format!("({k1},{k2})"),
                        None => lock.lock_id.to_string(),
                    });
                    cells.push(
                        lock.key
                            .as_deref()
                            .map_or("-".into(), |k| shortened(k, SHOWN_KEY_WIDTH)),
                    );
                    if fences {
                        cells.push(lock.fence.map_or("-".into(), |f| f.to_string()));
                    }
                } else {
                    cells.resize(if fences { 3 } else { 2 }, String::new());
                }
                first = false;
                rows.push(row(cells, lock, s, now));
            }
        }
        for line in columns(&rows) {
            out.push_str(&line);
            out.push('\n');
        }
        if locks
            .iter()
            .flat_map(|l| &l.holders)
            .any(|h| h.backend_start.is_some())
        {
            out.push_str(BOUND_NOTE);
            out.push('\n');
        }
        if locks
            .iter()
            .flat_map(|l| l.holders.iter().chain(&l.waiters))
            .any(|s| client_cell(s) == "?")
        {
            out.push_str(HIDDEN_NOTE);
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
        let id = pgcoord::lock_id_for_key(key);
        if !locks
            .iter()
            .any(|l| l.lock_id == id && l.int_pair.is_none())
        {
            out.push_str(&format!(
                "{} (id {id}): not held, no one waiting\n",
                printable(key)
            ));
        }
    }
    out
}

/// Why a row shows `?` (and a holder `-` for SINCE): another role's
/// session, whose details the server hides from this role.
const HIDDEN_NOTE: &str = "?: another role's session, whose client address and connection time \
                           PostgreSQL hides from this role (a holder's SINCE shows -); a role \
                           with pg_read_all_stats (or pg_monitor) sees them";

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
            // Shown: a Unix-socket session's CLIENT is `-` (hidden: `?`).
            backend_start: Some(Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()),
            since: Some(Utc.with_ymd_and_hms(2026, 11, 30, 9, 0, secs).unwrap()),
            blocked_by: if granted { vec![] } else { vec![10] },
        }
    }

    fn alpha(fence: Option<i64>) -> Vec<AdvisoryLock> {
        vec![AdvisoryLock {
            lock_id: 1068468761257547166,
            int_pair: None,
            key: Some("alpha".into()),
            fence,
            holders: vec![session(10, "eventsource/host-a:1", true, 0)],
            waiters: vec![session(11, "psql", false, 30)],
        }]
    }

    #[test]
    fn table_lists_holders_then_waiters() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let text = render_table(&alpha(None), &["alpha".into(), "beta".into()], false, now);
        let expected = "\
LOCK ID              KEY    STATE    MODE       PID  HOLDER              CLIENT     SINCE
1068468761257547166  alpha  held     exclusive  10   host-a:1            127.0.0.1  >=2026-11-30T08:00:00Z (<=1h3m ago)
                            waiting  exclusive  11   application \"psql\"  -          2026-11-30T09:00:30Z (2m30s ago)
>=: a holder's lock was granted at or after this time, when its session connected (PostgreSQL does not record when a lock was granted)
beta (id 8380746901480884457): not held, no one waiting
";
        assert_eq!(text, expected);
    }

    #[test]
    fn table_shows_the_fence_token_when_the_fencing_table_is_joined() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let text = render_table(&alpha(Some(42)), &[], true, now);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("LOCK ID              KEY    FENCE  STATE"));
        assert!(lines[1].starts_with("1068468761257547166  alpha  42     held"));
        assert!(lines[2].starts_with("                                   waiting"));
        let none = render_table(&alpha(None), &[], true, now);
        assert!(none.lines().nth(1).unwrap().contains("alpha  -      held"));
    }

    #[test]
    fn shared_holders_show_their_mode_and_count() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let shared = |pid, app| LockSession {
            mode: "ShareLock".into(),
            ..session(pid, app, true, 0)
        };
        let mut locks = alpha(None);
        locks[0].holders = vec![shared(10, "eventsource/host-a:1"), shared(12, "psql")];
        let text = render_table(&locks, &[], false, now);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("STATE    MODE                PID"),
            "{text}"
        );
        assert!(
            lines[1].contains("held     shared (2 holders)  10"),
            "{text}"
        );
        assert!(
            lines[2].contains("held     shared (2 holders)  12"),
            "{text}"
        );
        assert!(
            lines[3].contains("waiting  exclusive           11"),
            "{text}"
        );
    }

    #[test]
    fn a_holder_of_hidden_details_shows_no_bound_and_no_note() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let mut locks = alpha(None);
        locks[0].holders[0].backend_start = None;
        let text = render_table(&locks, &[], false, now);
        assert!(
            text.lines().nth(1).unwrap().ends_with("127.0.0.1  -"),
            "{text}"
        );
        assert!(!text.contains(">="), "{text}");
    }

    #[test]
    fn another_roles_hidden_session_is_explained_under_the_table() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        assert!(!render_table(&alpha(None), &[], false, now).contains("pg_read_all_stats"));
        let mut locks = alpha(None);
        locks[0].holders[0].backend_start = None;
        locks[0].holders[0].client_addr = None;
        let text = render_table(&locks, &[], false, now);
        assert!(
            text.lines().nth(1).unwrap().ends_with("?       -"),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l == HIDDEN_NOTE) && HIDDEN_NOTE.contains("pg_read_all_stats"),
            "{text}"
        );
    }

    /// One 2.4 MB key used to pad every row of the table to its width.
    #[test]
    fn a_long_key_is_shortened_and_widens_no_row() {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 9, 3, 0).unwrap();
        let mut locks = alpha(None);
        locks[0].key = Some(format!("tenant:{}", "x".repeat(100_000)));
        let text = render_table(&locks, &[], false, now);
        assert!(text.len() < 1000, "{text:.300}");
        let shown = format!("tenant:{}…", "x".repeat(SHOWN_KEY_WIDTH - 8));
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .contains(&format!("  {shown}  held")),
            "{text}"
        );
    }

    #[test]
    fn empty_listing_says_so() {
        let now = Utc::now();
        assert_eq!(
            render_table(&[], &[], false, now),
            "no advisory locks are held or awaited in this database\n"
        );
    }
}
