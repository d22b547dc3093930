//! The database URL: where it comes from, parsing, plain sessions.

use std::time::Duration;

use pgcoord::adapters::postgres::{
    connect_for_inspection, split_ssl_params, ConnectOptions, PostgresLockManager,
    PostgresLockManagerBuilder, SslParams,
};
use pgcoord::{BackendError, BackendErrorKind, Error};
use tokio_postgres::{Client, Config, NoTls};

use crate::redact::redact_url;
use crate::{exit, report};

/// How long opening a plain session may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed database URL.
#[derive(Debug, Clone)]
pub struct Database {
    /// The URL as given (contains the password, if any: never print it).
    pub url: String,
    /// The parsed settings.
    pub config: Config,
    /// libpq's `sslmode` and `sslrootcert` from the URL, which `Config`
    /// does not take (up to `verify-full`, on the library's rustls TLS).
    pub ssl: SslParams,
}

impl Database {
    /// Parses `url`; errors are usage errors and print no password.
    pub fn parse(url: &str) -> Result<Self, String> {
        crate::redact::register_url(url);
        let invalid = |e: &dyn std::fmt::Display| {
            format!(
                "invalid database URL {}: {}",
                redact_url(url),
                crate::redact::scrub_secrets(&e.to_string())
            )
        };
        let ssl = split_ssl_params(url).map_err(|e| invalid(&e))?;
        let mut config: Config = ssl.rest.parse().map_err(|e| invalid(&e))?;
        // As libpq does: PGPASSWORD when the URL names no password.
        if config.get_password().is_none() {
            if let Ok(pw) = std::env::var("PGPASSWORD") {
                if !pw.is_empty() {
                    crate::redact::register([pw.clone()]);
                    config.password(pw);
                }
            }
        }
        Ok(Self {
            url: url.to_owned(),
            config,
            ssl,
        })
    }

    /// A lock manager builder for this database, with its TLS settings.
    pub fn manager_builder(&self) -> PostgresLockManagerBuilder {
        let mut builder = PostgresLockManager::builder(self.config.clone());
        if let Some(mode) = self.ssl.mode {
            builder = builder.ssl_mode(mode);
        }
        if let Some(root) = &self.ssl.root_cert {
            builder = builder.ssl_root_cert(root);
        }
        builder
    }

    /// Opens a plain session on the library's TLS (the URL's sslmode and
    /// sslrootcert), application_name `pgcoord-cli`.
    pub async fn connect_tls(&self) -> Result<Client, Error> {
        let mut config = self.config.clone();
        config.application_name("pgcoord-cli");
        let mut options = ConnectOptions::from_config(config);
        if let Some(mode) = self.ssl.mode {
            options = options.with_ssl_mode(mode);
        }
        if let Some(root) = &self.ssl.root_cert {
            options = options.with_ssl_root_cert(root);
        }
        connect_for_inspection(options, CONNECT_TIMEOUT).await
    }

    /// The URL with its password masked, for messages.
    pub fn shown(&self) -> String {
        redact_url(&self.url)
    }

    /// Opens a plain session (application_name `pgcoord-cli`); its
    /// connection runs in a background task.
    pub async fn connect(&self) -> Result<Client, Error> {
        let mut config = self.config.clone();
        config.application_name("pgcoord-cli");
        config.connect_timeout(CONNECT_TIMEOUT);
        let connecting = config.connect(NoTls);
        let (client, connection) = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                return Err(BackendError::new(BackendErrorKind::Connect, error_chain(&e)).into())
            }
            Err(_) => {
                return Err(BackendError::new(
                    BackendErrorKind::Connect,
                    format!("no answer within {CONNECT_TIMEOUT:?}"),
                )
                .into())
            }
        };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "session ended with an error");
            }
        });
        Ok(client)
    }
}

/// An error and its causes on one line: the server's DETAIL and HINT,
/// which the driver puts on lines of their own, follow after `; `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    crate::redact::scrub_secrets(&one_line(&text))
}

/// Joins the lines of a message with `; `.
pub fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The URL from `--database-url` / `DATABASE_URL`, or a usage error (exit 2).
pub fn require_url(url: Option<String>) -> Result<Database, i32> {
    let Some(url) = url.filter(|u| !u.trim().is_empty()) else {
        report!("no database URL: pass --database-url URL or set DATABASE_URL");
        return Err(exit::USAGE);
    };
    Database::parse(&url).map_err(|msg| {
        report!("{msg}");
        exit::USAGE
    })
}

/// The one line for a library error that ends the tool: the error with
/// its causes, the database, and a hint of ours where one is right.
pub fn describe_failure(context: &str, db: Option<&Database>, err: &Error) -> String {
    let mut line = if context.is_empty() {
        error_chain(err)
    } else {
        format!("{context}: {}", error_chain(err))
    };
    if let Some(db) = db {
        if err.as_backend().is_some() {
            line.push_str(&format!(" (database {})", db.shown()));
        }
    }
    if let Some(hint) = exit::backend_hint(err) {
        line.push_str(&format!("; {hint}"));
    }
    line
}

/// Prints a library error that ends the tool, with a hint, and returns the exit code.
pub fn fail(context: &str, db: Option<&Database>, err: &Error) -> i32 {
    report!("{}", describe_failure(context, db, err));
    exit::for_error(err)
}
