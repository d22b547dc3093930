//! Tests of `track.rs`: the events a watch derives from two listings.

use super::*;
use chrono::TimeZone;

fn session(pid: i32, holder: &str, granted: bool) -> LockSession {
    LockSession {
        pid,
        mode: "ExclusiveLock".into(),
        granted,
        application_name: Some(format!("eventsource/{holder}")),
        holder_id: Some(holder.into()),
        client_addr: Some("10.0.0.1".into()),
        backend_start: None,
        since: Some(Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap()),
        blocked_by: if granted { vec![] } else { vec![1] },
    }
}

fn lock(holders: Vec<LockSession>, waiters: Vec<LockSession>) -> AdvisoryLock {
    AdvisoryLock {
        lock_id: 42,
        int_pair: None,
        key: Some("job a".into()),
        fence: None,
        holders,
        waiters,
    }
}

fn kinds(events: &[Event]) -> Vec<(Kind, i32)> {
    events.iter().map(|e| (e.event, e.session.pid)).collect()
}

#[test]
fn a_hand_over_is_a_release_then_a_grant() {
    let t = |s| Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, s).unwrap();
    let mut tracker = Tracker::default();
    let start = tracker.update(&[lock(vec![session(1, "a", true)], vec![])], t(1));
    assert_eq!(kinds(&start), [(Kind::Held, 1)]);
    let waiting = tracker.update(
        &[lock(
            vec![session(1, "a", true)],
            vec![session(2, "b", false)],
        )],
        t(2),
    );
    assert_eq!(kinds(&waiting), [(Kind::Waiting, 2)]);
    assert_eq!(
        waiting[0].line(),
        "2026-12-01T09:00:02.000Z waiting key=\"job a\" id=42 pid=2 holder=b \
         client=10.0.0.1 mode=exclusive blocked_by=1"
    );
    let handed = tracker.update(&[lock(vec![session(2, "b", true)], vec![])], t(5));
    assert_eq!(kinds(&handed), [(Kind::Released, 1), (Kind::Granted, 2)]);
    assert_eq!(handed[0].held_seconds, None, "held before the watch began");
    assert_eq!(handed[1].waited_seconds, Some(Duration::from_secs(5)));
    assert!(
        handed[1].line().ends_with(" waited=5s"),
        "{}",
        handed[1].line()
    );
    let gone = tracker.update(&[], t(9));
    assert_eq!(kinds(&gone), [(Kind::Released, 2)]);
    assert_eq!(gone[0].held_seconds, Some(Duration::from_secs(4)));
    let again = tracker.update(&[lock(vec![session(3, "c", true)], vec![])], t(10));
    assert_eq!(kinds(&again), [(Kind::Acquired, 3)]);
    assert!(tracker
        .update(&[lock(vec![session(3, "c", true)], vec![])], t(11))
        .is_empty());
}

/// A tracker that has seen one listing at `at`: session 1 ("a") holds the
/// lock, session 2 ("b") waits for it.
fn a_holds_b_waits(at: DateTime<Utc>) -> Tracker {
    let mut tracker = Tracker::default();
    tracker.update(
        &[lock(
            vec![session(1, "a", true)],
            vec![session(2, "b", false)],
        )],
        at,
    );
    tracker
}

#[test]
fn a_waiter_gone_with_the_holder_left_and_may_have_been_served() {
    let t = |s| Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, s).unwrap();
    let mut tracker = a_holds_b_waits(t(1));
    // Between two listings the holder let go and the waiter is gone:
    // granted and released in between, or gave up. Not "abandoned".
    let both = tracker.update(&[], t(3));
    assert_eq!(kinds(&both), [(Kind::Released, 1), (Kind::Left, 2)]);
    assert!(both[1].line().contains(" left "), "{}", both[1].line());
}

#[test]
fn a_waiter_that_leaves_is_abandoned_and_json_names_the_fields() {
    let t = |s| Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, s).unwrap();
    let mut tracker = a_holds_b_waits(t(1));
    let left = tracker.update(&[lock(vec![session(1, "a", true)], vec![])], t(3));
    assert_eq!(kinds(&left), [(Kind::Abandoned, 2)]);
    let json = serde_json::to_value(&left[0]).unwrap();
    assert_eq!(json["event"], "abandoned");
    assert_eq!(json["time"], "2026-12-01T09:00:03.000Z");
    assert_eq!(json["lock_id"], 42);
    assert_eq!(json["key"], "job a");
    assert_eq!(json["holder_id"], "b");
    assert_eq!(json["waited_seconds"], 3.0);
    assert!(json.get("held_seconds").is_none() && json.get("fence").is_none());
}

#[test]
fn json_bounds_a_holders_grant_as_lock_holders_json_does() {
    let t = |s| Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, s).unwrap();
    let has_bound = |e: &Event| {
        let json = serde_json::to_value(e).unwrap();
        json.get("granted_not_before").cloned()
    };
    let mut holder = session(1, "a", true);
    holder.backend_start = Some(Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap());
    let mut tracker = Tracker::default();
    let held = tracker.update(&[lock(vec![holder.clone()], vec![])], t(1));
    assert_eq!(
        has_bound(&held[0]),
        Some("2026-12-01T08:00:00Z".into()),
        "held"
    );
    // Hidden (another role's session): null, as in `lock holders --json`.
    let other = AdvisoryLock {
        lock_id: 43,
        ..lock(vec![session(3, "c", true)], vec![])
    };
    let acquired = tracker.update(&[lock(vec![holder], vec![]), other], t(2));
    assert_eq!(kinds(&acquired), [(Kind::Acquired, 3)]);
    assert_eq!(has_bound(&acquired[0]), Some(serde_json::Value::Null));
    // A waiter has no grant to bound; a release and a grant do.
    let mut tracker = a_holds_b_waits(t(1));
    let handed = tracker.update(&[lock(vec![session(2, "b", true)], vec![])], t(3));
    assert_eq!(kinds(&handed), [(Kind::Released, 1), (Kind::Granted, 2)]);
    assert!(handed.iter().all(|e| has_bound(e).is_some()));
    let mut tracker = a_holds_b_waits(t(1));
    let left = tracker.update(&[lock(vec![session(1, "a", true)], vec![])], t(3));
    assert_eq!(kinds(&left), [(Kind::Abandoned, 2)]);
    assert_eq!(has_bound(&left[0]), None);
}

#[test]
fn a_semaphore_head_moving_between_slots_is_one_wait() {
    let t = |s| Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, s).unwrap();
    let slot = |n: i64, holders, waiters| AdvisoryLock {
        lock_id: n,
        key: Some(format!("sem#permit/{n}")),
        ..lock(holders, waiters)
    };
    let mut tracker = Tracker::default();
    let held = || {
        vec![
            slot(0, vec![session(1, "a", true)], vec![]),
            slot(1, vec![session(2, "b", true)], vec![]),
        ]
    };
    tracker.update(&held(), t(1));
    // The head (pid 3) waits on slot 0, then on slot 1, then on slot 0.
    let mut on = |n: usize, at| {
        let mut locks = held();
        locks[n].waiters.push(session(3, "c", false));
        tracker.update(&locks, t(at))
    };
    assert_eq!(kinds(&on(0, 2)), [(Kind::Waiting, 3)]);
    assert!(on(1, 3).is_empty(), "not abandoned, not a new wait");
    assert!(on(0, 4).is_empty());
    // Gone from every slot: it left the queue.
    let gone = tracker.update(&held(), t(5));
    assert_eq!(kinds(&gone), [(Kind::Abandoned, 3)]);
    assert_eq!(semaphore_of("a#b#permit/12"), Some("a#b"));
    assert_eq!(semaphore_of("sem#permit/"), None);
    assert_eq!(semaphore_of("sem#permit/1x"), None);
}
