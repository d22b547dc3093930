//! [`BackendError`]: a database failure in the crate's own terms, and its
//! [`BackendErrorKind`]s.

use std::fmt;

use super::sql_state::SqlState;

/// What went wrong underneath, in database terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// No session could be opened: the server could not be reached,
    /// refused the connection, or did not answer within the connect
    /// timeout (unreachable host, wrong password, a connection reset while
    /// the TLS handshake was under way, a frozen server: message `HOST:PORT:
    /// no answer within 10s`). Nothing was done on the server.
    Connect,
    /// The server asked for a password and the connection settings have
    /// none (not in the URL, `PGPASSWORD` or a password file). Not worth
    /// retrying: the settings must change.
    PasswordRequired,
    /// The peer does not speak the PostgreSQL protocol, or lacks the
    /// functions the crate needs.
    NotPostgres,
    /// A statement failed on a live session.
    Query,
    /// The session ended (terminated backend, server restart, network loss).
    Closed,
    /// The client gave up waiting for the server on an open session, or
    /// for a pooled connection: a silent server or network after the
    /// session was established, no pooled connection free in time. A
    /// connect that ran out of its `connect_timeout` is
    /// [`Connect`](Self::Connect): no session was opened, so, as for a
    /// refused connection, nothing was done on the server. Never a lock held elsewhere: that is
    /// [`AcquireFailure::Timeout`](crate::error::AcquireFailure::Timeout).
    NoAnswer,
    /// The server is a hot standby (in recovery), where advisory locks
    /// exclude only that standby's own sessions.
    Standby,
    /// The fencing table (or function) the manager needs is missing
    /// (SQLSTATE 42P01/42883 on a fenced statement).
    FencingNotInstalled,
    /// TLS could not be set up with the settings given (an unreadable
    /// `sslrootcert`, `sslcert` or `sslkey`, a revocation list that cannot
    /// be used), or the server's certificate or TLS support did not meet
    /// them (a certificate from an unknown CA, for another host name,
    /// expired or revoked; no TLS where `sslmode` requires it). Not worth
    /// retrying: the settings or the server's certificate must change.
    Tls,
    /// Anything else.
    Other,
}

/// A database failure, independent of the driver that reported it.
pub struct BackendError {
    kind: BackendErrorKind,
    message: String,
    /// What the server said besides the message (boxed: most errors
    /// have none, and `Error` stays small).
    server: Option<Box<ServerSaid>>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    /// The driver's error when the message already says all its text
    /// (see [`BackendError::with_driver_error`]): reachable, but no cause.
    driver: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl BackendError {
    /// Builds a backend error of `kind` with a message.
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            server: None,
            source: None,
            driver: None,
        }
    }

    /// Attaches the SQLSTATE code reported by the server.
    pub fn with_code(mut self, code: impl Into<SqlState>) -> Self {
        self.server.get_or_insert_with(Box::default).code = Some(code.into());
        self
    }

    /// Attaches the server's HINT (what to do about the error).
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.server.get_or_insert_with(Box::default).hint = Some(hint.into());
        self.server_notes();
        self
    }

    /// Sets the notes that show the server's DETAIL and HINT as a cause.
    fn server_notes(&mut self) {
        if let Some(server) = self.server.as_deref_mut() {
            let lines: Vec<String> = [("DETAIL", &server.detail), ("HINT", &server.hint)]
                .into_iter()
                .filter_map(|(what, text)| text.as_ref().map(|t| format!("{what}: {t}")))
                .collect();
            server.notes = Some(SourceText(lines.join("\n")));
        }
    }

    /// Attaches the underlying error as this one's
    /// [`source`](std::error::Error::source): a cause that says what the
    /// message does not.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Attaches the driver's error whose text the message already carries
    /// (a server's message, say, with its SQLSTATE as [`code`](Self::code)):
    /// kept for [`driver_error`](Self::driver_error), and not a
    /// [`source`](std::error::Error::source), so that a walk of the chain
    /// says each cause once.
    pub fn with_driver_error(
        mut self,
        driver: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.driver = Some(Box::new(driver));
        self
    }

    /// Attaches the server's DETAIL (more about the error: the key of a
    /// unique violation, say). A walk of the chain shows it, and the HINT,
    /// as this error's cause.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.server.get_or_insert_with(Box::default).detail = Some(detail.into());
        self.server_notes();
        self
    }

    /// A copy with the same kind, message and code, whose source is the
    /// original source's text (driver errors cannot be cloned; their text,
    /// with the server's DETAIL and HINT, is kept). For adapters that report
    /// one failure to several callers.
    ///
    /// The copy has no [`driver_error`](Self::driver_error): the message,
    /// code, DETAIL and HINT already say what it said.
    pub fn clone_shallow(&self) -> Self {
        Self {
            kind: self.kind,
            message: self.message.clone(),
            server: self.server.clone(),
            source: self.source.as_ref().map(|s| {
                Box::new(SourceText(chain_text(s.as_ref())))
                    as Box<dyn std::error::Error + Send + Sync>
            }),
            driver: None,
        }
    }

    /// The same error, its message led by `what` it concerns (a server's
    /// address, say): `"{what}: {message}"`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn in_context(mut self, what: &str) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }

    /// The SQLSTATE code, when the server sent one.
    pub fn code(&self) -> Option<&SqlState> {
        self.server.as_ref().and_then(|s| s.code.as_ref())
    }

    /// The server's HINT, when it sent one.
    pub fn hint(&self) -> Option<&str> {
        self.server.as_ref().and_then(|s| s.hint.as_deref())
    }

    /// The server's DETAIL, when it sent one.
    pub fn detail(&self) -> Option<&str> {
        self.server.as_ref().and_then(|s| s.detail.as_deref())
    }

    /// The driver's own error, when there is one: on PostgreSQL a
    /// `tokio_postgres::Error`, on SQLite a `rusqlite::Error` (downcast it
    /// for the driver's typed codes). It is the
    /// [`source`](std::error::Error::source) only when the message does not
    /// already say what it says; a server's error, whose message and
    /// SQLSTATE this error carries, keeps it here alone.
    pub fn driver_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.driver.as_deref().or(self.source.as_deref())
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The SQLSTATE, DETAIL and HINT of a server's error.
#[derive(Debug, Clone, Default)]
struct ServerSaid {
    code: Option<SqlState>,
    hint: Option<String>,
    detail: Option<String>,
    /// DETAIL and HINT as a cause, for an error that has no source.
    notes: Option<SourceText>,
}

/// The text of an error that could not be cloned.
#[derive(Debug, Clone)]
struct SourceText(String);

/// An error's text and its causes', joined with `: ` (a driver's error says
/// only "db error"; the server's message, DETAIL and HINT are its cause's).
fn chain_text(e: &(dyn std::error::Error + Send + Sync + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

impl fmt::Display for SourceText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SourceText {}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("code", &self.code())
            .field("detail", &self.detail())
            .field("hint", &self.hint())
            .finish()
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            BackendErrorKind::Connect => "cannot connect to the database",
            BackendErrorKind::PasswordRequired => "cannot connect to the database",
            BackendErrorKind::NotPostgres => "the server is not a usable PostgreSQL",
            BackendErrorKind::Query => "database error",
            BackendErrorKind::Closed => "database session ended",
            BackendErrorKind::NoAnswer => "database did not answer in time",
            BackendErrorKind::Standby => "the server is a standby",
            BackendErrorKind::FencingNotInstalled => "fencing is not installed",
            BackendErrorKind::Tls => "cannot connect to the database over TLS",
            BackendErrorKind::Other => "database failure",
        };
        write!(f, "{what}: {}", self.message)?;
        if let Some(code) = self.code() {
            write!(f, " (SQLSTATE {code})")?;
        }
        Ok(())
    }
}

/// The source is what the message does not already say, so that a walk
/// of the chain says each cause once: the server's DETAIL and HINT (one
/// line each, `DETAIL: ...`) when it sent them, or an underlying error
/// whose text the message does not carry. The driver's own error, whose
/// text the message already says (a server's message and SQLSTATE, a
/// refused connection, a closed session), is no source: it is
/// [`BackendError::driver_error`].
impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        if let Some(source) = self.source.as_deref() {
            return Some(source as &(dyn std::error::Error + 'static));
        }
        self.server
            .as_ref()
            .and_then(|s| s.notes.as_ref())
            .map(|n| n as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(SourceText);
    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("db error")
        }
    }
    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_shallow_clone_keeps_what_the_source_chain_said() {
        let server = "FATAL: permission denied for database \"d\"\nDETAIL: User does not have CONNECT privilege.";
        let e = BackendError::new(BackendErrorKind::Connect, "refused")
            .with_source(Wrapper(SourceText(server.into())));
        let copy = e.clone_shallow();
        let text = std::error::Error::source(&copy).unwrap().to_string();
        assert_eq!(text, format!("db error: {server}"));
    }
}
