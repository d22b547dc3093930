//! Tests of `exit.rs`: codes, and the hints that go with backend errors.

use super::*;
use pgcoord::error::{BackendError, LockAcquisitionError};

#[test]
fn a_server_of_the_wrong_kind_for_target_session_attrs_is_not_told_to_run() {
    let hint = |message: &str| -> &'static str {
        let e: Error = BackendError::new(BackendErrorKind::Connect, message).into();
        backend_hint(&e).expect("a hint")
    };
    let primary = hint("127.0.0.1:5432: error connecting to server: database is not read only");
    assert!(
        primary.contains("the server is a primary") && !primary.contains("server runs"),
        "{primary}"
    );
    let standby = hint("error connecting to server: database does not allow writes");
    assert!(
        standby.contains("hot standby") && standby.contains("asks for a primary"),
        "{standby}"
    );
    assert!(hint("connection refused").contains("that the server runs"));
}

#[test]
fn a_watch_ends_cleanly_on_the_signals_that_stop_it_on_purpose() {
    use nix::sys::signal::Signal;
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        assert_eq!(watch_ended_by(sig), 0, "{sig}");
    }
    assert_eq!(watch_ended_by(Signal::SIGUSR1), SIGNAL_BASE + 10);
}

#[test]
fn a_refused_login_gets_the_hint_its_message_calls_for() {
    let refused = |message: &str, code: &str| -> &'static str {
        let e: Error = BackendError::new(BackendErrorKind::Connect, message)
            .with_code(code)
            .into();
        backend_hint(&e).expect("a hint")
    };
    let hba = refused(
        "pg_hba.conf rejects connection for host \"127.0.0.1\", user \"app\", database \
         \"x\", no encryption",
        "28000",
    );
    assert!(
        hba.contains("pg_hba.conf") && !hba.contains("password"),
        "{hba}"
    );
    let cert = refused("connection requires a valid client certificate", "28000");
    assert!(
        cert.contains("sslcert") && !cert.contains("password"),
        "{cert}"
    );
    let role = refused("role \"nobody\" does not exist", "28000");
    assert!(
        role.contains("user name") && !role.contains("password"),
        "{role}"
    );
    let password = refused("password authentication failed for user \"app\"", "28P01");
    assert_eq!(password, "check the user name and the password");
}

#[test]
fn codes_are_distinct() {
    let mut all = vec![
        USAGE,
        UNAVAILABLE,
        SOFTWARE,
        CONFLICT,
        LOCK_LOST,
        IO_ERROR,
        CANCELLED,
        CANNOT_EXECUTE,
        NOT_FOUND,
    ];
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 9);
}

#[test]
fn a_read_only_server_is_named_as_such() {
    let e: Error = BackendError::new(BackendErrorKind::Query, "read-only transaction")
        .with_code("25006")
        .into();
    let hint = backend_hint(&e).expect("a hint");
    assert!(
        hint.contains("hot standby") && hint.contains("default_transaction_read_only"),
        "{hint}"
    );
    // Any command's write (a dead letter replayed or dropped too): no
    // lock feature named.
    assert!(
        hint.contains("this command writes") && !hint.contains("fence"),
        "{hint}"
    );
}

#[test]
fn mixed_up_prepared_statements_point_at_a_pooler() {
    for code in ["42P05", "26000"] {
        let e: Error = BackendError::new(BackendErrorKind::Query, "prepared statement")
            .with_code(code)
            .into();
        let hint = backend_hint(&e).expect("a hint");
        assert!(
            hint.contains("need a direct connection or the pooler's session mode"),
            "{hint}"
        );
        // Not a word about locks only: `leader show` and `projection
        // status` fail the same way.
        assert!(!hint.contains("Locks need"), "{hint}");
    }
}

#[test]
fn errors_map_to_codes() {
    let backend: Error = BackendError::new(BackendErrorKind::Connect, "refused").into();
    assert_eq!(for_error(&backend), UNAVAILABLE);
    let through_acquire: Error = LockAcquisitionError::new(
        "k",
        AcquireFailure::Backend(BackendError::new(BackendErrorKind::Closed, "gone")),
        None,
    )
    .into();
    assert_eq!(for_error(&through_acquire), UNAVAILABLE);
    let too_long: Error = LockAcquisitionError::new(
        "k",
        AcquireFailure::KeyTooLong {
            len: pgcoord::MAX_KEY_LEN + 1,
            limit: pgcoord::MAX_KEY_LEN,
        },
        None,
    )
    .into();
    assert_eq!(for_error(&too_long), USAGE);
    assert_eq!(for_error(&Error::InvalidArgument("x".into())), USAGE);
    let cancelled: Error = LockAcquisitionError::new(
        "k",
        AcquireFailure::Cancelled {
            reason: "canceling statement due to user request".into(),
        },
        None,
    )
    .into();
    assert_eq!(for_error(&cancelled), CANCELLED);
    let full: Error = BackendError::new(BackendErrorKind::Connect, "out of shared memory")
        .with_code("53200")
        .into();
    assert!(backend_hint(&full).is_some_and(|h| h.contains("max_locks_per_transaction")));
    // The server's own HINT came through: no second one of ours.
    let hinted: Error = BackendError::new(BackendErrorKind::Connect, "out of shared memory")
        .with_code("53200")
        .with_hint("You might need to increase max_locks_per_transaction.")
        .into();
    assert_eq!(backend_hint(&hinted), None);
    let too_many: Error = BackendError::new(BackendErrorKind::Connect, "too many clients")
        .with_code("53300")
        .into();
    assert_eq!(backend_hint(&too_many), None);
    let no_password: Error =
        BackendError::new(BackendErrorKind::PasswordRequired, "password missing").into();
    assert!(backend_hint(&no_password).is_some_and(|h| h.contains("PGPASSWORD")));
    let refused: Error = BackendError::new(BackendErrorKind::Connect, "refused").into();
    assert!(backend_hint(&refused).is_some_and(|h| h.contains("URL")));
    let tls: Error = BackendError::new(BackendErrorKind::Tls, "unknown CA").into();
    assert_eq!(for_error(&tls), UNAVAILABLE);
    let tls_hint = backend_hint(&tls).expect("a hint");
    assert!(tls_hint.contains("sslrootcert"), "{tls_hint}");
    assert!(!tls_hint.contains("URL"), "{tls_hint}");
    let unbound: Error = BackendError::new(
        BackendErrorKind::Tls,
        "channel_binding=require refused the login: TLS was not in use (sslmode=disable)",
    )
    .into();
    let unbound_hint = backend_hint(&unbound).expect("a hint");
    assert!(unbound_hint.contains("PGCHANNELBINDING"), "{unbound_hint}");
    assert!(!unbound_hint.contains("server runs"), "{unbound_hint}");
    assert!(unbound_hint.contains("PgBouncer"), "{unbound_hint}");
    let closed: Error = LockAcquisitionError::new("k", AcquireFailure::ManagerClosed, None).into();
    assert_eq!(for_error(&closed), SOFTWARE);
    // A login refused for lack of CONNECT is a refused login (69); the
    // same SQLSTATE on our objects after connecting is setup (78).
    let no_connect: Error = BackendError::new(BackendErrorKind::Connect, "permission denied")
        .with_code("42501")
        .into();
    assert_eq!(for_error(&no_connect), UNAVAILABLE);
    assert!(backend_hint(&no_connect).is_some_and(|h| h.contains("CONNECT privilege")));
    let on_table: Error = BackendError::new(BackendErrorKind::Query, "permission denied")
        .with_code("42501")
        .into();
    assert_eq!(for_error(&on_table), CONFIG);
    // `lock install` with no schema of the search_path: the set-up, not
    // the command line.
    let no_schema: Error = BackendError::new(BackendErrorKind::Query, "no schema")
        .with_code("3F000")
        .into();
    assert_eq!(for_error(&no_schema), CONFIG);
    // A statement the server cancelled for its statement_timeout: the
    // hint names the setting and says the server answered.
    let timed_out: Error = BackendError::new(
        BackendErrorKind::Query,
        "canceling statement due to statement timeout",
    )
    .with_code("57014")
    .into();
    let hint = backend_hint(&timed_out).expect("a hint");
    assert!(
        hint.contains("statement_timeout") && hint.contains("answered"),
        "{hint}"
    );
}
