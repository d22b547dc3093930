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
