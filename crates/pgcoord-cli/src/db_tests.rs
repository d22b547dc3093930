//! Tests of `db.rs`: the hints and the one line of a failure.

use super::*;
use pgcoord::error::BackendError;

#[test]
fn without_a_url_no_hint_mentions_the_database_url() {
    let db = Database {
        url: None,
        options: ConnectOptions::parse("host=db.internal dbname=orders").unwrap(),
    };
    for (kind, code) in [
        (BackendErrorKind::Connect, None),
        (BackendErrorKind::Tls, None),
        (BackendErrorKind::Connect, Some("3D000")),
        (BackendErrorKind::Connect, Some("28000")),
        (BackendErrorKind::Connect, Some("28P01")),
    ] {
        let mut e = BackendError::new(kind, "refused");
        if let Some(code) = code {
            e = e.with_code(code);
        }
        let hint = hint(Some(&db), &e.into()).expect("a hint");
        assert!(!hint.contains("URL"), "{kind:?} {code:?}: {hint}");
    }
}

#[test]
fn an_acquisition_timeout_is_written_as_the_tool_writes_durations() {
    use pgcoord::error::{AcquireFailure, LockAcquisitionError};
    let db = Database::parse("postgres://u@db.internal/app").unwrap();
    let failed = |timeout: Duration| -> Error {
        LockAcquisitionError::new(
            "election:nightly",
            AcquireFailure::Backend(BackendError::new(BackendErrorKind::NoAnswer, "silent")),
            Some(timeout),
        )
        .into()
    };
    let line = describe_failure("", Some(&db), &failed(Duration::from_secs(100 * 86_400)));
    assert!(line.contains("(timeout 100d)"), "{line}");
    assert!(!line.contains("8640000s"), "{line}");
    let line = describe_failure("", Some(&db), &failed(Duration::from_millis(4_999_959)));
    assert!(line.contains("(timeout 1h23m19s)"), "{line}");
    let line = describe_failure("", Some(&db), &failed(Duration::from_millis(1500)));
    assert!(line.contains("(timeout 1.5s)"), "{line}");
}

#[test]
fn a_failure_that_had_nothing_to_do_with_time_shows_no_timeout() {
    use pgcoord::error::{AcquireFailure, LockAcquisitionError};
    let db = Database::parse("postgres://u@db.internal/app").unwrap();
    for reason in [
        AcquireFailure::Backend(BackendError::new(BackendErrorKind::Connect, "refused")),
        AcquireFailure::Backend(BackendError::new(BackendErrorKind::Standby, "read-only")),
        AcquireFailure::KeyTooLong {
            len: 5000,
            limit: 4096,
        },
    ] {
        let e: Error =
            LockAcquisitionError::new("nightly", reason, Some(Duration::from_secs(30))).into();
        let line = describe_failure("", Some(&db), &e);
        assert!(!line.contains("timeout"), "{line}");
        assert!(
            line.contains("could not acquire lock \"nightly\""),
            "{line}"
        );
    }
    // The key held until the timeout ran out keeps it.
    let e: Error = LockAcquisitionError::new(
        "nightly",
        AcquireFailure::Timeout,
        Some(Duration::from_secs(30)),
    )
    .into();
    assert!(describe_failure("", Some(&db), &e).contains("(timeout 30s)"));
}

#[test]
fn a_read_only_command_through_a_transaction_pooler_is_told_to_connect_directly() {
    let db = Database::parse("postgres://u@bouncer.internal:6432/app").unwrap();
    for code in ["42P05", "26000"] {
        let e: Error = BackendError::new(
            BackendErrorKind::Query,
            "prepared statement \"s2\" already exists",
        )
        .with_code(code)
        .into();
        let line = describe_failure("cannot read the projection's status", Some(&db), &e);
        assert!(
            line.starts_with("cannot read the projection's status: "),
            "{line}"
        );
        assert!(
            line.contains("a pooler in transaction or statement mode"),
            "{line}"
        );
        assert!(
            line.contains("a direct connection or the pooler's session mode"),
            "{line}"
        );
    }
}
