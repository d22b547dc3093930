//! The tool's own exit codes (documented in `--help` and the README).
//!
//! `lock run` otherwise exits with its command's exit code, or 128+N when the
//! command died of signal N, as shells do.

use pgcoord::{
    error::{AcquireFailure, BackendErrorKind},
    Error,
};

/// Bad usage: unknown option, bad duration, bad URL or `PG*` variable,
/// unknown service.
pub const USAGE: i32 = 2;
/// The database could not be reached or failed (sysexits `EX_UNAVAILABLE`).
pub const UNAVAILABLE: i32 = 69;
/// An internal error (sysexits `EX_SOFTWARE`).
pub const SOFTWARE: i32 = 70;
/// The lock was not acquired: held elsewhere, or the timeout elapsed
/// (sysexits `EX_TEMPFAIL`: try again later). `--conflict-exit-code` changes it.
pub const CONFLICT: i32 = 75;
/// The lock was lost while the command ran (its database session ended);
/// the command was stopped. `--lost-exit-code` changes it.
pub const LOCK_LOST: i32 = 76;
/// A write to standard output failed (sysexits `EX_IOERR`): a full disk,
/// a closed pipe.
pub const IO_ERROR: i32 = 74;
/// The server cancelled the wait for the lock (`pg_cancel_backend`, a
/// server-side `statement_timeout`): not a conflict, nobody said the key
/// is held elsewhere.
pub const CANCELLED: i32 = 77;
/// The database lacks something the options need (`--fence` before
/// `lock install`, a privilege on our objects the role lacks once logged
/// in; a login refused for lack of CONNECT is [`UNAVAILABLE`]): EX_CONFIG.
pub const CONFIG: i32 = 78;
/// The command was found but could not be executed (as in shells).
pub const CANNOT_EXECUTE: i32 = 126;
/// The command was not found (as in shells).
pub const NOT_FOUND: i32 = 127;
/// Added to a signal number for "died of / interrupted by signal N".
pub const SIGNAL_BASE: i32 = 128;

/// The exit code of a `--watch` ended by `sig` (`lock holders`, `leader
/// show`, `projection status`): 0 for the signals that end a watch on
/// purpose (Ctrl-C, a service stopped, a closed terminal); 128+N for the
/// others.
pub fn watch_ended_by(sig: nix::sys::signal::Signal) -> i32 {
    use nix::sys::signal::Signal;
    match sig {
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP => 0,
        other => SIGNAL_BASE + other as i32,
    }
}

/// The exit code for a library error that ends the tool.
pub fn for_error(err: &Error) -> i32 {
    // This process ran out of descriptors: the server is not at fault.
    if crate::os_limits::out_of_descriptors(err) {
        return SOFTWARE;
    }
    if let Some(backend) = err.as_backend() {
        use pgcoord::error::SqlState;
        // A login the server refused is "could not be reached / refused
        // the login", whatever its SQLSTATE: 42501 at connect time is a
        // role without the CONNECT privilege on the database, not a
        // privilege on our objects.
        if backend.kind() == BackendErrorKind::Connect {
            return UNAVAILABLE;
        }
        // The database, as it is set up, lacks what was asked of it: a
        // privilege of the role on our objects, or one fence table
        // (`lock install`).
        let setup = [SqlState::INSUFFICIENT_PRIVILEGE, SqlState::DUPLICATE_TABLE];
        if backend.code().is_some_and(|c| setup.contains(c)) {
            return CONFIG;
        }
        return UNAVAILABLE;
    }
    match err {
        Error::InvalidArgument(_) => USAGE,
        Error::LockAcquisition(e) if matches!(e.reason, AcquireFailure::KeyTooLong { .. }) => USAGE,
        e if e.as_backend().map(|b| b.kind()) == Some(BackendErrorKind::Standby) => UNAVAILABLE,
        Error::LockAcquisition(e) if matches!(e.reason, AcquireFailure::Cancelled { .. }) => {
            CANCELLED
        }
        _ => SOFTWARE,
    }
}

/// A hint of ours for a backend error, only where it is right: none where
/// the server's own message says what is wrong (too many connections,
/// starting up), and for a full lock table (53200) only when the server's
/// HINT did not come through.
pub fn backend_hint(err: &Error) -> Option<&'static str> {
    if crate::os_limits::out_of_descriptors(err) {
        return Some(crate::os_limits::OUT_OF_DESCRIPTORS_HINT);
    }
    let backend = err.as_backend()?;
    Some(match (backend.kind(), backend.code().map(|c| c.code())) {
        // The driver's words when the server answered but is not what
        // target_session_attrs asked for: it runs, it is the wrong kind.
        (BackendErrorKind::Connect, None)
            if backend.message().contains("database is not read only") =>
        {
            "the server is a primary (it takes writes) and target_session_attrs asks for a \
             standby (standby, read-only): point the URL at a standby, or drop \
             target_session_attrs"
        }
        (BackendErrorKind::Connect, None)
            if backend.message().contains("database does not allow writes") =>
        {
            "the server is a hot standby or read-only (default_transaction_read_only) and \
             target_session_attrs asks for a primary (primary, read-write): point the URL at \
             the primary, or list it among the hosts"
        }
        (BackendErrorKind::Connect, None) => "check the database URL and that the server runs",
        (BackendErrorKind::PasswordRequired, _) => {
            "give the password in the URL, PGPASSWORD or a password file (~/.pgpass, \
             PGPASSFILE)"
        }
        (BackendErrorKind::Tls, _) if backend.message().contains("channel_binding=require") => {
            "channel_binding=require (or PGCHANNELBINDING=require) needs a SCRAM password login \
             over TLS: connect over TCP with TLS, as a user whose pg_hba.conf method is \
             scram-sha-256, or drop channel_binding=require; trying again will not help"
        }
        (BackendErrorKind::Tls, _) => {
            "check the TLS settings (sslmode, sslrootcert, sslcert, sslkey, sslcrl, sslcrldir; \
             or PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY, PGSSLCRL, PGSSLCRLDIR) and the \
             server's certificate; trying again will not help"
        }
        (BackendErrorKind::Connect, Some("28P01")) => "check the user name and the password",
        // 28000 (invalid_authorization_specification) covers refusals that
        // no password mends: the server's message says which.
        (BackendErrorKind::Connect, Some("28000")) => refused_login(backend.message()),
        // The name may come from the URL, PGDATABASE, a service file or the
        // user name: the server's message names it, the hint not its source.
        (BackendErrorKind::Connect, Some("3D000")) => "check the database name",
        // "permission denied for database": the role exists and may log
        // in, but not to this database (the server's DETAIL, "User does
        // not have CONNECT privilege.", does not always come through).
        (BackendErrorKind::Connect, Some("42501")) => {
            "the role lacks the CONNECT privilege on this database (GRANT CONNECT ON DATABASE \
             ... TO the role, or to PUBLIC); trying again will not help"
        }
        // Only when the server sent no HINT of its own (the tool prints the
        // server's, see `describe_failure`).
        (_, Some("53200")) if backend.hint().is_none() => {
            "the server's shared lock table is full: its max_locks_per_transaction is too small \
             for the locks all sessions hold"
        }
        (BackendErrorKind::NotPostgres, _) => "the server does not behave as PostgreSQL (a pooler in transaction mode, or another database?)",
        // A session that finds prepared statements it did not make, or
        // misses its own: statements of several clients mixed on one
        // server session, or one client's spread over several.
        // "cannot execute ... in a read-only transaction": fencing, the
        // run log and `lock install` write.
        (_, Some("25006")) => {
            "the server is read-only (a hot standby?): fence tokens, --min-interval's run log \
             and `lock install` are writes, which need the primary"
        }
        // The server answered: it cancelled the statement (outside a wait
        // for a lock, which is exit 77 and says so itself).
        (_, Some("57014")) if backend.message().contains("statement timeout") => {
            "the server cancelled the statement because it ran longer than the statement_timeout \
             setting in force for this role or database (the server answered; it was not \
             unreachable)"
        }
        (_, Some("57014")) => {
            "the server cancelled the statement (pg_cancel_backend, or a pooler's query timeout); \
             it answered, it was not unreachable"
        }
        // Every command's, the read-only ones too: the driver prepares
        // each statement on the session it believes it has.
        // The cause itself leads the line (`POOLER_MIX_UP`, in the
        // messages module).
        (_, Some("42P05" | "26000")) => {
            "eventsource's commands (the read-only ones too) need a direct connection or the \
             pooler's session mode (`eventsource lock doctor` checks)"
        }
        _ => return None,
    })
}

/// Our hint for a login refused with SQLSTATE 28000, by the server's
/// `message`: a pg_hba.conf line, a client certificate, else the role.
fn refused_login(message: &str) -> &'static str {
    if message.contains("pg_hba.conf") {
        "the server's pg_hba.conf does not let this user in from this host with this \
         encryption: check the user name, the host and sslmode (or PGSSLMODE), or ask \
         for a pg_hba.conf line that allows it"
    } else if message.contains("certificate") {
        "the server wants a client certificate it trusts: check sslcert and sslkey (PGSSLCERT, \
         PGSSLKEY)"
    } else {
        "check the user name (the role must exist and be allowed to log in)"
    }
}

#[cfg(test)]
mod tests {
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
        assert!(backend_hint(&e)
            .expect("a hint")
            .contains("need the primary"));
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
        let closed: Error =
            LockAcquisitionError::new("k", AcquireFailure::ManagerClosed, None).into();
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
}
