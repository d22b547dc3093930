//! Opening sessions: connection settings, error mapping, query cancellation.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{CancelToken, Client, Config};
use tokio_util::sync::CancellationToken;

use super::tls::{refuse_weak_direct, MakeRustls, TlsSettings};
use crate::ports::error::{BackendError, BackendErrorKind};

/// Opens sessions configured for holding advisory locks.
pub(crate) struct Connector {
    config: Config,
    /// The config split into one per host, each attempt bounded on its own
    /// (see `hosts.rs`).
    per_host: Vec<Config>,
    connect_timeout: Duration,
    /// Used for the sessions and their query cancels alike.
    tls: MakeRustls,
}

/// A session's connection, to be polled by whoever drives it: it reads the
/// server's answers and writes the client's requests, and ends with the
/// connection.
pub(crate) type ConnectionFuture =
    Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// A live session: the client, and a token cancelled when its connection ends.
pub(crate) struct Connected {
    pub(crate) client: Client,
    pub(crate) closed: CancellationToken,
}

impl Connector {
    pub(crate) fn new(
        mut config: Config,
        holder_id: Option<&str>,
        connect_timeout: Duration,
        tls: TlsSettings,
    ) -> Self {
        config.application_name(super::application_name::application_name(holder_id));
        config.ssl_mode(tls.mode.driver_mode());
        // No `options` startup parameter of ours: poolers such as PgBouncer
        // refuse it unless configured to ignore it (and then drop it
        // silently). The sessions apply their settings with SET instead,
        // pipelined with the statements they prepare (see the session's
        // statements); a user's own `options` pass through untouched.
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(5));
        config.keepalives_interval(Duration::from_secs(1));
        config.keepalives_retries(3);
        // Keepalives probe only an idle connection: data sent just before
        // a silent cut and never acknowledged (a wait's statement) would
        // be retransmitted for about 15 minutes. Unless the URL sets it,
        // give up on unacknowledged data as soon as the keepalives would.
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(Duration::from_secs(8));
        }
        config.connect_timeout(connect_timeout);
        Self {
            per_host: super::hosts::one_per_host(&config),
            config,
            connect_timeout,
            tls: MakeRustls::new(tls),
        }
    }

    /// The server's address and port, for spans (`server.address`,
    /// `server.port`): the first host of the config.
    pub(crate) fn server(&self) -> (String, u16) {
        use tokio_postgres::config::Host;
        let host = match (self.config.get_hosts().first(), self.config.get_hostaddrs()) {
            (Some(Host::Tcp(h)), _) => h.clone(),
            #[cfg(unix)]
            (Some(Host::Unix(p)), _) => p.display().to_string(),
            (None, [addr, ..]) => addr.to_string(),
            (None, []) => "localhost".to_owned(),
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        (host, port)
    }

    /// Opens a session; its connection task runs in the background. With
    /// several hosts, each is tried in turn, each within the connect
    /// timeout, as libpq does.
    pub(crate) async fn connect(&self) -> Result<Connected, BackendError> {
        let (client, connection) = self.connect_driven().await?;
        let closed = CancellationToken::new();
        let on_close = closed.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "lock session connection ended with an error");
            }
            on_close.cancel();
        });
        Ok(Connected { client, closed })
    }

    /// Opens a session and gives back its connection future for the
    /// caller to poll in its own task (no connection task: a lock
    /// session's actor drives it, saving a task hop per statement). The
    /// client's statements make progress only while the future is polled;
    /// it ends when the connection does. Hosts are tried as in
    /// [`connect`](Self::connect).
    pub(crate) async fn connect_driven(&self) -> Result<(Client, ConnectionFuture), BackendError> {
        connect_each_host(&self.per_host, &self.tls, self.connect_timeout).await
    }

    /// Asks the server to cancel whatever `token`'s session is running.
    pub(crate) async fn cancel(&self, token: CancelToken) {
        let _ =
            tokio::time::timeout(self.connect_timeout, token.cancel_query(self.tls.clone())).await;
    }

    /// The TCP ports the settings reach their hosts on (none for Unix
    /// sockets): what a server reached directly listens on.
    pub(crate) fn tcp_ports(&self) -> Vec<u16> {
        let ports = self.config.get_ports();
        let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let hosts = self.config.get_hosts();
        if hosts.is_empty() {
            return (0..self.config.get_hostaddrs().len()).map(port).collect();
        }
        hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| matches!(h, tokio_postgres::config::Host::Tcp(_)))
            .map(|(i, _)| port(i))
            .collect()
    }
}

/// Opens a session on the first of `per_host` (one config per host, see
/// `hosts::one_per_host`) that takes it, each host within `timeout`, as
/// libpq does; when none does, every host's failure, in order.
///
/// As in libpq, a host that cannot be reached (refused, no answer, gone
/// during the handshake) passes the turn to the next host, and neither a
/// TLS failure nor a refused login does: a certificate the settings
/// refuse, no TLS where they require it, `channel_binding=require` unmet,
/// or a server that refuses the role's credentials (SQLSTATE class 28: a
/// wrong password, a `pg_hba.conf` rejection, a client certificate that
/// does not name the user) ends the walk with that host's error. Going on
/// would put the session, and the advisory locks it takes, on another
/// server than a libpq client with the same settings uses, with the broken
/// host never reported, and would spend the other hosts' logins on the
/// same refused credentials.
pub(crate) async fn connect_each_host(
    per_host: &[Config],
    tls: &MakeRustls,
    timeout: Duration,
) -> Result<(Client, ConnectionFuture), BackendError> {
    let settings = tls.settings();
    if let Some(config) = per_host.first() {
        refuse_weak_direct(config, settings.mode)
            .map_err(|why| BackendError::new(BackendErrorKind::Tls, why))?;
    }
    tls.ready()?;
    let mut failures = Vec::new();
    for config in per_host {
        let named = named_for_tls(config, settings);
        let config = named.as_ref().unwrap_or(config);
        let (watched, handshake) = tls.watched();
        let attempt = config.connect(watched);
        let failure = match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok((client, connection))) => return Ok((client, Box::pin(connection))),
            Ok(Err(e)) => {
                let attempt = super::tls_failure::Attempt {
                    tls_in_use: handshake.load(std::sync::atomic::Ordering::Relaxed),
                    socket: super::hosts::first_host_is_a_socket(config),
                };
                let cx = super::tls_failure::TlsContext::of(settings);
                match super::tls_failure::channel_binding_refused(&e, &cx, &attempt) {
                    Some(why) => BackendError::new(BackendErrorKind::Tls, why),
                    None => connect_error(e, settings),
                }
            }
            Err(_) => BackendError::new(
                BackendErrorKind::Connect,
                format!("no answer within {timeout:?}"),
            ),
        };
        let last = failure.kind() == BackendErrorKind::Tls
            || super::host_failures::refused_login(&failure);
        failures.push((super::hosts::host_name(config), failure));
        if last {
            break;
        }
    }
    Err(super::host_failures::every_host_failed(
        failures,
        per_host.len(),
    ))
}

/// `config` with hosts given by address alone (`hostaddr` without `host`)
/// named by their addresses, for the driver's TLS handshake, except under
/// `verify-full`: libpq checks no name below it (and sends no SNI for an
/// address), and refuses `verify-full` without a host name, as the driver
/// does then (`tls_failure` words it). `None` when nothing is to change.
pub(crate) fn named_for_tls(config: &Config, settings: &TlsSettings) -> Option<Config> {
    match settings.mode {
        super::tls::SslMode::VerifyFull => None,
        _ => super::hosts::addresses_as_names(config),
    }
}

/// [`connect_each_host`] for one `config`, split into its hosts here.
pub(crate) async fn connect_any_host(
    config: &Config,
    tls: &MakeRustls,
    timeout: Duration,
) -> Result<(Client, ConnectionFuture), BackendError> {
    connect_each_host(&super::hosts::one_per_host(config), tls, timeout).await
}

/// The statement every lock session runs once, pipelined with its prepares.
///
/// Locks are held outside transactions, and waits are bounded per statement
/// by the manager; server-wide defaults must not cut them.
pub(crate) const SESSION_SETUP: &str = "SET lock_timeout = 0; SET statement_timeout = 0; \
     SET idle_in_transaction_session_timeout = 0";

/// Set apart because servers before 14 do not know it (its failure is
/// ignored): a waiter whose client died leaves the wait queue at once
/// instead of keeping its place until the lock reaches it.
pub(crate) const SESSION_SETUP_PG14: &str = "SET client_connection_check_interval = '1s'";

/// Maps a driver error raised while connecting with the TLS `settings`.
///
/// A TLS failure ([`tls_failure`](super::tls_failure)) is
/// [`BackendErrorKind::Tls`] with our words for it, and without the
/// driver's error as its source: that error's text names rustls's variants
/// (`UnknownIssuer`), which the words say.
pub(crate) fn connect_error(e: tokio_postgres::Error, settings: &TlsSettings) -> BackendError {
    let cx = super::tls_failure::TlsContext::of(settings);
    if let Some(why) = super::tls_failure::tls_failure(&e, &cx) {
        return BackendError::new(BackendErrorKind::Tls, why);
    }
    let mut err = pg_error(e, BackendErrorKind::Connect);
    let lower = err.message().to_ascii_lowercase();
    if lower.contains("unexpected message")
        || lower.contains("error parsing")
        || lower.contains("invalid message")
        || lower.contains("unexpected eof")
        // The codec's complaint about a partial frame at end of stream:
        // what a peer that answers in another protocol and hangs up gives.
        || lower.contains("bytes remaining on stream")
        // It said yes to SSLRequest (the first byte was 'S'), then did not
        // speak TLS.
        || lower.contains("received corrupt message")
    {
        err = BackendError::new(
            BackendErrorKind::NotPostgres,
            format!(
                "the server did not answer as PostgreSQL does ({})",
                err.message()
            ),
        );
    }
    err
}

/// SQLSTATEs with which the server ends a session: `admin_shutdown`
/// (`pg_terminate_backend`, fast shutdown), `crash_shutdown`,
/// `idle_session_timeout`, `idle_in_transaction_session_timeout`.
const SESSION_ENDED: [&str; 4] = ["57P01", "57P02", "57P05", "25P03"];

/// Whether `e` means the session is over: the connection closed, or the
/// server sent a FATAL error (it closes the connection right after, but the
/// driver may not have seen the close yet).
pub(crate) fn ends_session(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_some_and(|c| SESSION_ENDED.contains(&c.code()))
        || e.as_db_error()
            .is_some_and(|db| matches!(db.severity(), "FATAL" | "PANIC"))
}

/// `e` and its causes, as one line ("error communicating with the
/// server: Connection timed out (os error 110)").
pub(crate) fn with_causes(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Whether the connection ended because the operating system gave up on
/// it (ETIMEDOUT: `tcp_user_timeout` or the keepalives): the server went
/// silent, as behind a network cut, rather than ending the session.
pub(crate) fn timed_out(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::TimedOut;
        }
        source = s.source();
    }
    false
}

/// Whether connecting failed because the server asked for a password the
/// settings lack. tokio-postgres reports that as a configuration error with
/// no SQLSTATE and no public kind, so its text is the only sign; this is
/// the one place that reads it, and callers get a typed
/// [`BackendErrorKind::PasswordRequired`].
fn asks_for_a_password(e: &tokio_postgres::Error) -> bool {
    e.code().is_none()
        && e.as_db_error().is_none()
        && std::error::Error::source(e).is_some_and(|cause| cause.to_string() == "password missing")
}

/// Maps a driver error to the crate's backend error, keeping the SQLSTATE.
pub(crate) fn pg_error(e: tokio_postgres::Error, default_kind: BackendErrorKind) -> BackendError {
    let code = e.code().map(crate::ports::sql_state::SqlState::from);
    let message = match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => with_causes(&e),
    };
    let kind = if e.is_closed() {
        BackendErrorKind::Closed
    } else if default_kind == BackendErrorKind::Connect && asks_for_a_password(&e) {
        BackendErrorKind::PasswordRequired
    } else if default_kind != BackendErrorKind::Connect && ends_session(&e) {
        // The server ended the session (terminated backend, shutdown,
        // idle timeout): the connection is gone, whatever the statement was.
        BackendErrorKind::Closed
    } else if matches!(
        e.code(),
        Some(c) if *c == SqlState::UNDEFINED_FUNCTION || *c == SqlState::FEATURE_NOT_SUPPORTED
    ) {
        BackendErrorKind::NotPostgres
    } else if e.code().is_some() && default_kind == BackendErrorKind::Connect {
        BackendErrorKind::Connect
    } else if e.code().is_some() {
        BackendErrorKind::Query
    } else {
        default_kind
    };
    // The driver says "invalid configuration: password missing", which
    // reads as a malformed setting; what happened is the server's request.
    let message = if kind == BackendErrorKind::PasswordRequired {
        "the server asks for a password and none was given".to_owned()
    } else {
        message
    };
    let db = e.as_db_error();
    let hint = db.and_then(|db| db.hint()).map(str::to_owned);
    let detail = db.and_then(|db| db.detail()).map(str::to_owned);
    // The message says the server's message (with the SQLSTATE as the
    // code), or else the driver's whole text: the driver's error is kept
    // for `driver_error()` and is no source, so that error reporters say
    // that text once. A server's DETAIL and HINT, which the message does
    // not carry, are the cause a chain walk shows.
    let mut err = BackendError::new(kind, message).with_driver_error(e);
    if let Some(detail) = detail {
        err = err.with_detail(detail);
    }
    if let Some(hint) = hint {
        err = err.with_hint(hint);
    }
    if let Some(code) = code {
        err = err.with_code(code);
    }
    err
}
