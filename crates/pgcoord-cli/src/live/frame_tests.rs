//! Tests of [`super`]: what `lock top` shows.

use super::*;
use chrono::TimeZone;

fn session(pid: i32, holder: &str, granted: bool, secs: u32) -> LockSession {
    LockSession {
        pid,
        mode: "ExclusiveLock".into(),
        granted,
        application_name: Some(format!("eventsource/{holder}")),
        holder_id: Some(holder.into()),
        client_addr: Some("10.0.0.1".into()),
        backend_start: Some(Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap()),
        since: Some(Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, secs).unwrap()),
        blocked_by: if granted { vec![] } else { vec![pid - 1] },
    }
}

fn lock(
    id: i64,
    key: Option<&str>,
    holders: Vec<LockSession>,
    waiters: Vec<LockSession>,
) -> AdvisoryLock {
    AdvisoryLock {
        lock_id: id,
        int_pair: None,
        key: key.map(str::to_owned),
        fence: Some(id * 10),
        holders,
        waiters,
    }
}

#[test]
fn longest_waits_come_first_and_unseen_grants_are_bounds() {
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 1, 0).unwrap();
    let locks = vec![
        lock(1, Some("quiet"), vec![session(10, "a", true, 0)], vec![]),
        lock(
            2,
            None,
            vec![session(20, "b", true, 0)],
            vec![session(21, "c", false, 50)],
        ),
        lock(
            3,
            Some("busy"),
            vec![session(30, "d", true, 0)],
            vec![session(31, "e", false, 0)],
        ),
    ];
    let mut seen = Tracker::default();
    seen.update(&locks, now);
    let header = Header {
        database: "app@db/app",
        fence_table: Some("public.eventsource_lock_fences".into()),
        interval: Duration::from_secs(1),
        error: None,
        rows_as_of: None,
        interactive: true,
        only_keys: 0,
        notes: Vec::new(),
    };
    let lines = frame(&locks, &seen, &header, now, None);
    assert_eq!(
        lines[0],
        "eventsource lock top - app@db/app - 09:01:00 UTC - every 1s - q quits"
    );
    assert_eq!(lines[1], "3 locks: 3 held, 2 waiting; longest wait 1m; fence tokens from public.eventsource_lock_fences");
    let table: Vec<&str> = lines[3..9].iter().map(String::as_str).collect();
    assert_eq!(
        table,
        [
            "KEY    STATE    MODE       PID  HOLDER  CLIENT    FOR     BLOCKED BY  FENCE",
            "busy   held     exclusive  30   d       10.0.0.1  <=1h1m              30",
            "       waiting  exclusive  31   e       10.0.0.1  1m      30",
            "2      held     exclusive  20   b       10.0.0.1  <=1h1m              20",
            "       waiting  exclusive  21   c       10.0.0.1  10s     20",
            "quiet  held     exclusive  10   a       10.0.0.1  <=1h1m              10",
        ]
    );
    assert!(lines[9].starts_with("<=: held when top started"));
    let small = frame(&locks, &seen, &header, now, Some((30, 8)));
    assert_eq!(small.len(), 8, "{small:#?}");
    assert!(small.iter().all(|l| l.chars().count() <= 30), "{small:#?}");
    assert!(small[6].starts_with("... 3 more rows"), "{small:#?}");
}

#[test]
fn a_grant_seen_counts_from_when_it_was_seen() {
    let t = |m, s| Utc.with_ymd_and_hms(2026, 12, 1, 9, m, s).unwrap();
    let mut seen = Tracker::default();
    seen.update(&[], t(0, 0));
    let locks = vec![lock(7, Some("k"), vec![session(10, "a", true, 0)], vec![])];
    seen.update(&locks, t(0, 5));
    let header = Header {
        database: "d",
        fence_table: None,
        interval: Duration::from_secs(1),
        error: Some("refresh failed".into()),
        rows_as_of: None,
        interactive: false,
        only_keys: 0,
        notes: Vec::new(),
    };
    let lines = frame(&locks, &seen, &header, t(2, 5), None);
    assert_eq!(lines[2], "refresh failed");
    assert_eq!(lines[4], "k    held   exclusive  10   a       10.0.0.1  2m");
    assert!(!lines
        .iter()
        .any(|l| l.contains("q quits") || l.contains("FENCE") || l.starts_with("<=")));
    // A refresh failed since: the clock goes on, the rows' ages stop
    // at their listing.
    let stale = Header {
        rows_as_of: Some(t(1, 5)),
        ..header
    };
    let lines = frame(&locks, &seen, &stale, t(2, 5), None);
    assert!(lines[0].contains(" 09:02:05 UTC "), "{lines:#?}");
    assert_eq!(lines[4], "k    held   exclusive  10   a       10.0.0.1  1m");
}

#[test]
fn a_view_of_given_keys_says_so() {
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
    let header = |only_keys| Header {
        database: "d",
        fence_table: None,
        interval: Duration::from_secs(1),
        error: None,
        rows_as_of: None,
        interactive: false,
        only_keys,
        notes: Vec::new(),
    };
    let seen = Tracker::default();
    let lines = frame(&[], &seen, &header(2), now, None);
    assert_eq!(lines[1], "0 locks of the 2 keys given: 0 held, 0 waiting");
    assert_eq!(
        lines.last().unwrap(),
        "none of the keys given is held or awaited"
    );
    let lines = frame(&[], &seen, &header(1), now, None);
    assert_eq!(
        lines.last().unwrap(),
        "the key given is not held, no one waiting"
    );
    let locks = vec![lock(7, Some("k"), vec![session(10, "a", true, 0)], vec![])];
    let lines = frame(&locks, &seen, &header(1), now, None);
    assert_eq!(lines[1], "1 lock of the key given: 1 held, 0 waiting");
}

#[test]
fn another_roles_session_is_explained_in_the_footer() {
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
    let mut hidden = session(10, "a", true, 0);
    hidden.client_addr = None;
    hidden.backend_start = None;
    let locks = vec![lock(7, Some("k"), vec![hidden], vec![])];
    let header = Header {
        database: "d",
        fence_table: None,
        interval: Duration::from_secs(1),
        error: None,
        rows_as_of: None,
        interactive: false,
        only_keys: 0,
        notes: Vec::new(),
    };
    let lines = frame(&locks, &Tracker::default(), &header, now, None);
    let cells: Vec<&str> = lines[4].split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2..], ["?", "-"], "{lines:#?}");
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("?: another role's session"),
        "{lines:#?}"
    );
    let shown = vec![lock(7, Some("k"), vec![session(10, "a", true, 0)], vec![])];
    let lines = frame(&shown, &Tracker::default(), &header, now, None);
    assert!(!lines.iter().any(|l| l.starts_with("?:")), "{lines:#?}");
}
