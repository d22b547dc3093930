//! The lock manager's `tracing` spans: names and OpenTelemetry-style
//! fields of acquire (granted, and timed out), try_lock and release, as
//! `docs/observability.md` lists them.

use crate::common;
use crate::span_capture;

use std::time::Duration;

use pgcoord::{lock_id_for_key, DistributedLock};
use pgcoord_testkit::pg::TestDatabase;
use span_capture::Capture;

#[tokio::test]
async fn lock_spans_carry_the_database_fields_and_the_outcome() {
    let db = TestDatabase::create().await.unwrap();
    let (m, other) = (common::manager(&db, "spans"), common::manager(&db, "other"));
    let key = format!("spans:{}", uuid::Uuid::new_v4());
    let port = db.config().get_ports()[0].to_string();
    let capture = Capture::default();
    let _guard = capture.install();

    let g = m
        .acquire(&key, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(other
        .try_lock(&key)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    let err = other
        .acquire(&key, Some(Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    g.release().await.unwrap();
    // The timed-out wait may still be granted and give the key back for a
    // moment (docs of acquire): try until it is free.
    let mut tries_held = 0;
    while other
        .try_lock(&key)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none()
    {
        tries_held += 1;
        assert!(tries_held < 1_000, "the key never came free");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    other.release(&key).await.unwrap();

    let acquires = capture.spans("eventsource.lock.acquire");
    assert_eq!(acquires.len(), 2, "{acquires:#?}");
    for s in &acquires {
        let f = &s.fields;
        assert_eq!(f["db.system"], "postgresql", "{s:?}");
        assert_eq!(f["db.system.name"], "postgresql");
        assert_eq!(f["db.operation.name"], "acquire");
        assert_eq!(f["otel.name"], "lock acquire");
        assert_eq!(f["otel.kind"], "client");
        assert_eq!(f["server.port"], port);
        assert!(!f["server.address"].is_empty());
        assert_eq!(f["eventsource.lock.key"], key);
        assert_eq!(f["eventsource.lock.id"], lock_id_for_key(&key).to_string());
        assert!(f.contains_key("eventsource.lock.wait_us"), "{s:?}");
    }
    let (granted, timed_out) = (&acquires[0].fields, &acquires[1].fields);
    assert_eq!(granted["eventsource.lock.outcome"], "acquired");
    assert!(!granted.contains_key("error.type"));
    assert_eq!(timed_out["eventsource.lock.outcome"], "timeout");
    assert_eq!(timed_out["error.type"], "timeout");
    assert_eq!(timed_out["otel.status_code"], "ERROR");

    let tries = capture.spans("eventsource.lock.try_lock");
    let outcomes: Vec<&str> = tries
        .iter()
        .map(|s| s.fields["eventsource.lock.outcome"].as_str())
        .collect();
    assert_eq!(outcomes.first(), Some(&"held_elsewhere"));
    assert_eq!(outcomes.last(), Some(&"acquired"));
    assert_eq!(outcomes.len(), tries_held + 2);
    assert!(tries
        .iter()
        .all(|s| s.fields["db.operation.name"] == "try_lock"));
    let releases = capture.spans("eventsource.lock.release");
    assert_eq!(
        releases.len(),
        1,
        "the manual release (a guard's release has no span)"
    );
    assert_eq!(releases[0].fields["eventsource.lock.outcome"], "released");
}

#[tokio::test]
async fn a_key_too_long_fails_its_span_like_any_other_error() {
    let db = TestDatabase::create().await.unwrap();
    let m = common::manager(&db, "long");
    let long = "x".repeat(pgcoord::MAX_KEY_LEN + 1);
    let capture = Capture::default();
    let _guard = capture.install();

    assert!(m.acquire(&long, None).await.is_err());
    assert!(m.try_lock(&long).await.is_err());
    // Not held (no manager holds such a key), and said in a short line.
    let not_held = m.release(&long).await.unwrap_err().to_string();
    assert_eq!(
        not_held,
        format!("lock \"{}…\" is not held by this manager", &long[..64])
    );

    // The key is shown as in the errors: a document passed as a key by
    // mistake is not copied into every span (before: 1 MiB per span).
    let shown = format!("{}…", &long[..64]);
    for name in ["eventsource.lock.acquire", "eventsource.lock.try_lock"] {
        let spans = capture.spans(name);
        assert_eq!(spans.len(), 1, "{name}: {spans:#?}");
        let f = &spans[0].fields;
        assert_eq!(f["eventsource.lock.outcome"], "error", "{name}: {f:?}");
        assert_eq!(f["error.type"], "key_too_long", "{name}: {f:?}");
        assert_eq!(f["otel.status_code"], "ERROR", "{name}: {f:?}");
        assert_eq!(f["eventsource.lock.key"], shown, "{name}");
    }
    let releases = capture.spans("eventsource.lock.release");
    assert_eq!(releases[0].fields["eventsource.lock.key"], shown);
}

#[tokio::test]
async fn try_lock_any_and_release_all_run_in_spans_of_their_own() {
    let db = TestDatabase::create().await.unwrap();
    let (m, other) = (common::manager(&db, "many"), common::manager(&db, "other"));
    let tag = uuid::Uuid::new_v4();
    let (held, free) = (format!("many:{tag}:held"), format!("many:{tag}:free"));
    let _blocker = other.acquire(&held, None).await.unwrap();
    let capture = Capture::default();
    let _guard = capture.install();

    let (i, g) = m.try_lock_any(&[&held, &free]).await.unwrap().unwrap();
    assert_eq!(i, 1);
    assert!(m.try_lock_any(&[&held]).await.unwrap().is_none());
    assert_eq!(pgcoord::LockRegistry::release_all(&m).await.unwrap(), 1);
    drop(g);

    let anys = capture.spans("eventsource.lock.try_lock_any");
    assert_eq!(anys.len(), 2, "{anys:#?}");
    let (took, none) = (&anys[0].fields, &anys[1].fields);
    assert_eq!(took["db.operation.name"], "try_lock_any");
    assert_eq!(took["otel.name"], "lock try_lock_any");
    assert_eq!(took["eventsource.lock.outcome"], "acquired");
    assert_eq!(took["eventsource.lock.key"], free);
    assert_eq!(
        took["eventsource.lock.id"],
        lock_id_for_key(&free).to_string()
    );
    assert_eq!(none["eventsource.lock.outcome"], "held_elsewhere");
    assert!(!none.contains_key("eventsource.lock.key"), "{none:?}");
    let all = capture.spans("eventsource.lock.release_all");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].fields["db.operation.name"], "release_all");
    assert_eq!(all[0].fields["eventsource.lock.outcome"], "released");
    assert_eq!(all[0].fields["eventsource.lock.count"], "1");
}

#[tokio::test]
async fn a_dropped_acquire_closes_its_span_as_abandoned() {
    let db = TestDatabase::create().await.unwrap();
    let (m, other) = (common::manager(&db, "drops"), common::manager(&db, "other"));
    let key = format!("drops:{}", uuid::Uuid::new_v4());
    let _held = other.acquire(&key, None).await.unwrap();
    let client = db.connect().await.unwrap();
    let capture = Capture::default();
    let _guard = capture.install();

    tokio::select! {
        r = m.acquire(&key, None) => panic!("granted while held elsewhere: {r:?}"),
        () = common::wait_for_waiters(&client, lock_id_for_key(&key), 1) => {}
    }

    let spans = capture.spans("eventsource.lock.acquire");
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].fields["eventsource.lock.outcome"], "abandoned");
    assert!(!spans[0].fields.contains_key("error.type"));
}
