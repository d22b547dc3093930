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
        // privilege of the role on our objects, one fence table, a schema
        // of the search_path to install in (`lock install`).
        let setup = [
            SqlState::INSUFFICIENT_PRIVILEGE,
            SqlState::DUPLICATE_TABLE,
            SqlState::INVALID_SCHEMA_NAME,
        ];
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
        // Several hosts, none a primary now: the one that was could not be
        // reached (a failover under way, or the URL lists no primary).
        (BackendErrorKind::Connect, None)
            if backend.message().contains("database does not allow writes")
                && backend.message().starts_with("no host could be used") =>
        {
            "no host of the URL takes writes now: those that answered are hot standbys or \
             read-only (default_transaction_read_only), the others could not be reached (a \
             failover under way, or no primary among the hosts); with --timeout the run tries \
             again until one answers as the primary"
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
             over TLS to the server itself: connect over TCP with TLS, as a user whose \
             pg_hba.conf method is scram-sha-256, and not through a pooler that offers no \
             SCRAM-SHA-256-PLUS (PgBouncer); or drop channel_binding=require; trying again will \
             not help"
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
        // "cannot execute ... in a read-only transaction": the command
        // writes (a fence token, the run log, `lock install`, a replayed
        // or dropped dead letter). The lock commands name their writes
        // themselves (`read_only`).
        (_, Some("25006")) => {
            "the session is read-only (a hot standby, or default_transaction_read_only on for \
             the role or database), and this command writes: run it against the primary, as a \
             role whose sessions may write"
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
#[path = "exit_tests.rs"]
mod tests;
