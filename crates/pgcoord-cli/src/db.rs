//! The connection settings: from `--database-url` / `DATABASE_URL`, filled
//! from libpq's environment (or from that environment alone), parsing,
//! plain sessions.

use std::time::Duration;

use pgcoord::{error::BackendErrorKind, Error};
use pgcoord::{
    inspect::connect_for_inspection,
    postgres::{LibpqEnv, PasswordSource, PostgresLockManagerBuilder},
    ConnectOptions, PostgresLockManager,
};
use tokio_postgres::config::Host;
use tokio_postgres::Client;

use crate::duration::format_duration;
pub use crate::error_line::error_chain;
use crate::printable::printable;
use crate::redact::redact_url;
use crate::{exit, report};

/// How long opening a plain session may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a query of the tool's own sessions (`lock holders` and `top`,
/// `leader show`, `projection status` and `dlq`) may go unanswered: a server that
/// accepts a connection and then stays silent, or a query queued behind
/// another session's lock, ends the command (or, watching, that look)
/// instead of hanging it.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// How long one look of a watching command (`lock top`, `lock holders
/// --watch`, `leader show --watch`, `projection status --watch`) may take
/// before it counts as failed: its interval, at least [`REFRESH_FLOOR`]
/// and at most [`ANSWER_WITHIN`].
pub fn refresh_within(interval: Duration) -> Duration {
    interval.clamp(REFRESH_FLOOR, ANSWER_WITHIN)
}

/// The shortest time a refresh is given to be answered, however short the
/// interval: a busy server's reply to the one statement, or a new session.
pub const REFRESH_FLOOR: Duration = Duration::from_secs(2);

/// Why a server may not answer, as the tool's messages put it: a session
/// pooler whose server connections are all taken (PgBouncer's
/// `pool_size`) holds the query without a word, as a silent server does.
pub const NO_ANSWER_CAUSES: &str = "(silent, a pooler with no server connection free, or the \
                                    query waits for another session's lock)";

/// `work`, or a [`BackendErrorKind::NoAnswer`] error once [`ANSWER_WITHIN`]
/// has passed.
pub async fn answered<T>(
    work: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    answered_within(ANSWER_WITHIN, work).await
}

/// `work`, or a [`BackendErrorKind::NoAnswer`] error once `limit` has
/// passed (`work` is then dropped).
pub async fn answered_within<T>(
    limit: Duration,
    work: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(limit, work).await {
        Ok(done) => done,
        Err(_) => Err(no_answer(limit)),
    }
}

/// The error of a server that did not answer within `limit`.
pub fn no_answer(limit: Duration) -> Error {
    pgcoord::error::BackendError::new(
        BackendErrorKind::NoAnswer,
        format!(
            "the server did not answer within {} {NO_ANSWER_CAUSES}",
            format_duration(limit)
        ),
    )
    .into()
}

/// Warns on stderr when `client`'s server is a hot standby: its advisory
/// locks are its own sessions' only and exclude nobody on the primary, so
/// what the command shows there (`shown`: "\"not held\"", "\"vacant\"")
/// says nothing about the primary. True for a standby.
pub async fn warn_if_standby(client: &Client, shown: &str) -> Result<bool, Error> {
    let in_recovery = in_recovery(client).await?;
    if in_recovery {
        report!(
            "{STANDBY_WARNING}, so {shown} here says nothing about the primary; point the URL \
             at the primary to see the holders that count"
        );
    }
    Ok(in_recovery)
}

/// How the warning of a command run on a hot standby begins.
pub const STANDBY_WARNING: &str = "warning: the server is a hot standby (in recovery): its \
                                   advisory locks are those of its own sessions only and \
                                   exclude nobody on the primary";

/// Whether `client`'s server is a hot standby (`pg_is_in_recovery()`).
pub async fn in_recovery(client: &Client) -> Result<bool, Error> {
    let row = answered(async {
        client
            .query_one("SELECT pg_catalog.pg_is_in_recovery()", &[])
            .await
            .map_err(Error::from)
    })
    .await?;
    Ok(row.get(0))
}

/// The connection settings of a command.
#[derive(Debug, Clone)]
pub struct Database {
    /// The URL as given, if any (contains the password, if any: never
    /// print it). `None`: the settings come from libpq's environment alone.
    pub url: Option<String>,
    /// The settings: the URL's, then libpq's environment, service file,
    /// defaults and password file, in libpq's precedence.
    pub options: ConnectOptions,
}

impl Database {
    /// Parses `url`, filling what it leaves out from libpq's environment;
    /// errors are usage errors and print no password.
    pub fn parse(url: &str) -> Result<Self, String> {
        crate::redact::register_url(url);
        Self::resolve(Some(url)).map_err(|e| {
            format!(
                // The environment fills what the URL leaves out, and its
                // errors name their variable: not every error is the URL's.
                // The URL comes last: a masked `password=***` value runs to
                // the next space, so punctuation after it would be masked
                // too when the whole line is scrubbed again.
                "invalid connection settings: {}; database URL: {}",
                crate::printable::printable(&crate::redact::scrub_secrets(&e.to_string())),
                crate::printable::printable(&redact_url(url)),
            )
        })
    }

    /// The settings from libpq's environment alone (no URL), as psql.
    pub fn from_env() -> Result<Self, String> {
        Self::resolve(None).map_err(|e| {
            format!(
                "invalid connection settings in the environment: {}",
                crate::redact::scrub_secrets(&e.to_string())
            )
        })
    }

    fn resolve(url: Option<&str>) -> Result<Self, Error> {
        let options = ConnectOptions::resolve(url, &LibpqEnv::from_process())?;
        // A password from a file is masked like one from the URL.
        if let Some(pw) = options.config().get_password() {
            crate::redact::register([String::from_utf8_lossy(pw).into_owned()]);
        }
        // Its warnings (a password file others may read) were logged by
        // the library at `warn`, which the tool shows by default.
        Ok(Self {
            url: url.map(str::to_owned),
            options,
        })
    }

    /// A lock manager builder for this database, with its TLS settings.
    pub fn manager_builder(&self) -> PostgresLockManagerBuilder {
        PostgresLockManager::builder(self.options.clone())
    }

    /// The options of the tool's own plain sessions: application_name
    /// `pgcoord-cli` unless the settings name one (`PGAPPNAME`); every
    /// other setting as the locks' sessions have it (TLS: mode, CA,
    /// client certificate, revocation lists, versions).
    pub fn inspection_options(&self) -> ConnectOptions {
        match self.options.config().get_application_name() {
            Some(_) => self.options.clone(),
            None => self.options.clone().with_application_name("pgcoord-cli"),
        }
    }

    /// Where the tool connects, for messages: `postgres://USER[:***]@HOST:PORT/DATABASE`
    /// (`?host=DIR` for a Unix socket), never the password; escaped (see
    /// [`printable`]): a database or role name may hold anything.
    pub fn shown(&self) -> String {
        let c = self.options.config();
        let user = c.get_user().unwrap_or("");
        let password = if c.get_password().is_some() {
            ":***"
        } else {
            ""
        };
        let ports = c.get_ports();
        let port_of = |i: usize| {
            ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432)
        };
        let mut tcp = Vec::new();
        let mut query = Vec::new();
        // Hosts given by address alone (`hostaddr`, `PGHOSTADDR`) by their address.
        let by_address: Vec<Host> = match c.get_hosts() {
            [] => c
                .get_hostaddrs()
                .iter()
                .map(|a| Host::Tcp(a.to_string()))
                .collect(),
            _ => Vec::new(),
        };
        for (i, host) in c.get_hosts().iter().chain(&by_address).enumerate() {
            match host {
                Host::Tcp(h) if h.contains(':') => tcp.push(format!("[{h}]:{}", port_of(i))),
                Host::Tcp(h) => tcp.push(format!("{h}:{}", port_of(i))),
                #[cfg(unix)]
                Host::Unix(dir) => {
                    query.push(format!("host={}", dir.display()));
                    query.push(format!("port={}", port_of(i)));
                }
            }
        }
        let userinfo = if user.is_empty() {
            String::new()
        } else {
            format!("{user}{password}@")
        };
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        printable(&format!(
            "postgres://{userinfo}{}/{}{query}",
            tcp.join(","),
            c.get_dbname().unwrap_or("")
        ))
    }

    /// How long opening a plain session may take: `connect_timeout`
    /// (`PGCONNECT_TIMEOUT`) when given, else [`CONNECT_TIMEOUT`].
    pub fn connect_timeout(&self) -> Duration {
        self.options
            .config()
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT)
    }

    /// Opens a plain session (see [`inspection_options`](Self::inspection_options));
    /// its connection runs in a background task.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it returns, the half-open connection is
    /// closed and nothing is left behind (as `connect_for_inspection`).
    pub async fn connect(&self) -> Result<Client, Error> {
        connect_for_inspection(self.inspection_options(), self.connect_timeout()).await
    }
}

/// The settings from `--database-url` / `DATABASE_URL` (filled from
/// libpq's environment), else from libpq's environment alone; bad settings
/// are a usage error (exit 2).
pub fn require_url(url: Option<String>) -> Result<Database, i32> {
    let parsed = match url.filter(|u| !u.trim().is_empty()) {
        Some(url) => Database::parse(&url),
        None => Database::from_env(),
    };
    parsed.map_err(|msg| {
        report!("{msg}");
        exit::USAGE
    })
}

/// The one line for a library error that ends the tool: the error with
/// its causes, the database, and a hint of ours where one is right.
pub fn describe_failure(context: &str, db: Option<&Database>, err: &Error) -> String {
    describe_failure_with(context, db, err, hint(db, err))
}

/// [`describe_failure`] with `hint` for ours (one the caller learnt more
/// for, as `read_only` does).
pub fn describe_failure_with(
    context: &str,
    db: Option<&Database>,
    err: &Error,
    hint: Option<String>,
) -> String {
    let mut chain = with_own_timeout(err, error_chain(err));
    if crate::messages::is_pooler_mix_up(err) {
        // The server's words ("prepared statement \"s0\" already exists")
        // blame the database; the cause comes first.
        chain = format!("{}: {chain}", crate::messages::POOLER_MIX_UP);
    }
    let mut line = if context.is_empty() {
        chain
    } else {
        format!("{context}: {chain}")
    };
    // The server's own HINT, when the error's text does not carry it (a
    // copy of an error the engine reported to several callers keeps it in
    // `hint()` only).
    if let Some(server_hint) = err.as_backend().and_then(|b| b.hint()) {
        let shown = crate::error_line::shown(server_hint);
        if !line.contains(&shown) {
            line.push_str(&format!("; HINT: {shown}"));
        }
    }
    if let Some(db) = db {
        if err.as_backend().is_some() {
            line.push_str(&format!(" (database {})", db.shown()));
        }
    }
    if let Some(hint) = hint {
        line.push_str(&format!("; {hint}"));
    }
    line
}

/// `chain` with an acquisition's timeout as the tool writes durations
/// (`(timeout 100d)`), not as the library's error does (`Duration`'s
/// `Debug`, `(timeout 8640000s)`); without it when the failure had nothing
/// to do with time (a refused connection, a bad password, a standby): there
/// it read as if the server had been waited for that long.
fn with_own_timeout(err: &Error, chain: String) -> String {
    let Some(a) = err.as_lock_acquisition() else {
        return chain;
    };
    let Some(t) = a.timeout.filter(|t| !t.is_zero()) else {
        return chain;
    };
    let library = a.to_string();
    let Some(at) = library.rfind(" (timeout ") else {
        return chain;
    };
    if !failure_is_about_time(&a.reason) {
        return chain.replacen(&library[at..], "", 1);
    }
    // To the millisecond, as the library's.
    let shown = match t.as_millis() {
        0 => t,
        ms => Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX)),
    };
    let ours = format!(" (timeout {})", format_duration(shown));
    chain.replacen(&library[at..], &ours, 1)
}

/// Whether the acquisition's timeout belongs in the text of `reason`: it
/// ran out (the key held, the wait sessions busy, the server silent) or
/// the server cancelled the wait.
fn failure_is_about_time(reason: &pgcoord::error::AcquireFailure) -> bool {
    use pgcoord::error::AcquireFailure;
    match reason {
        AcquireFailure::Timeout
        | AcquireFailure::Cancelled { .. }
        | AcquireFailure::WaitSessionsBusy { .. } => true,
        AcquireFailure::Backend(b) => b.kind() == BackendErrorKind::NoAnswer,
        _ => false,
    }
}

/// Our hint for `err`, told by where the settings and the password came from.
fn hint(db: Option<&Database>, err: &Error) -> Option<String> {
    let hint = exit::backend_hint(err)?;
    let Some(db) = db else {
        return Some(hint.to_owned());
    };
    let backend = err.as_backend()?;
    let source = db.options.password_source();
    Some(
        match (backend.kind(), backend.code().map(|c| c.code()), source) {
            (BackendErrorKind::Connect, Some("28P01"), Some(PasswordSource::PasswordFile(f))) => {
                format!("check the user name and the password in {}", f.display())
            }
            (BackendErrorKind::Connect, Some("28P01"), Some(PasswordSource::ServiceFile(f))) => {
                format!("check the user name and the password in {}", f.display())
            }
            (BackendErrorKind::Connect, Some("28P01"), Some(PasswordSource::Environment)) => {
                "check the user name and the password (PGPASSWORD)".to_owned()
            }
            _ if db.url.is_none() => hint.replace("the database URL", "the PG* environment"),
            _ => hint.to_owned(),
        },
    )
}

/// Prints a library error that ends the tool, with a hint, and returns the exit code.
pub fn fail(context: &str, db: Option<&Database>, err: &Error) -> i32 {
    report!("{}", describe_failure(context, db, err));
    exit::for_error(err)
}

#[cfg(test)]
#[path = "db_tests.rs"]
mod tests;
