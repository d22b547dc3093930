//! [`ConnectOptions`]: the one parser of PostgreSQL connection strings, for
//! the lock manager and the read-model pool alike.
//!
//! A `postgres://` / `postgresql://` URL is read by libpq's URI grammar
//! (credentials up to the first `@`, the database name as written after
//! the first `/`; a tab or line break is refused); its user name,
//! password, database name and query values are percent-decoded with
//! `percent-encoding` (`+` stays a plus, as libpq has it). A `key=value`
//! string (libpq's conninfo, values optionally in single quotes) is split
//! respecting the quotes. Either way libpq's `sslmode`
//! (`disable` .. `verify-full`) and `sslrootcert`, which tokio-postgres
//! refuses or ignores, are taken out into [`TlsSettings`]; every other
//! parameter (`options`, `application_name`, `connect_timeout`, ...) goes to
//! tokio-postgres's own parser unchanged, so what it accepts and rejects is
//! the driver's rule. Errors never repeat the string (it may hold a
//! password). The splitting itself is `connstring.rs`.
//!
//! [`ConnectOptions::from_env`] and [`ConnectOptions::parse_with_env`] add
//! libpq's environment, service file, defaults and password file with
//! libpq's precedence (`resolve.rs`).

use std::fmt;
use std::path::PathBuf;

use tokio_postgres::Config;

use super::libpq_env::LibpqEnv;
use super::resolve::{resolve, PasswordSource, Resolved};
use super::tls::{SslMode, TlsSettings};
use crate::ports::error::{Error, Result};

/// A parsed connection string: the driver's settings and the TLS settings.
///
/// ```
/// use pgcoord::{ConnectOptions, postgres::SslMode};
/// let o = ConnectOptions::parse(
///     "postgres://app:p%40ss@db.internal:6432/orders?sslmode=verify-full&sslrootcert=/etc/ca.pem&options=-c%20search_path%3Dread",
/// )?;
/// assert_eq!(o.config().get_password(), Some(&b"p@ss"[..]));
/// assert_eq!(o.config().get_dbname(), Some("orders"));
/// assert_eq!(o.config().get_options(), Some("-c search_path=read"));
/// assert_eq!(o.ssl_mode(), SslMode::VerifyFull);
/// assert_eq!(o.ssl_root_cert().unwrap().to_str(), Some("/etc/ca.pem"));
/// # Ok::<(), pgcoord::Error>(())
/// ```
#[derive(Clone)]
pub struct ConnectOptions {
    config: Config,
    tls: TlsSettings,
    password_source: Option<PasswordSource>,
    warnings: Vec<String>,
}

impl ConnectOptions {
    /// Parses a `postgres://` URL or a `key=value` connection string, by
    /// itself: no environment variable or file is read (as tokio-postgres
    /// reads a string). For libpq's rules use
    /// [`ConnectOptions::parse_with_env`].
    ///
    /// A string that names no host (`postgres:///app`, `dbname=app`, `""`)
    /// connects as libpq does, through a local server's Unix socket: the
    /// first of `/var/run/postgresql` (where Debian's and Ubuntu's libpq
    /// look) and `/tmp` (upstream libpq's) that holds the socket of the
    /// port (`.s.PGSQL.5432` by default); when neither does, `localhost`
    /// over TCP, as [`from_env`](Self::from_env) defaults. The host chosen
    /// is in [`config`](Self::config), and errors name it.
    ///
    /// Fails with [`Error::InvalidArgument`] for a malformed string, an
    /// unknown parameter or an invalid value; the message names the
    /// parameter and never repeats the string or a value.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(Self::from_resolved(resolve(Some(s), None)?))
    }

    /// Connection settings from libpq's environment alone, as `psql` with
    /// no arguments finds its server; the same as
    /// [`parse_with_env`](Self::parse_with_env) with an empty string.
    ///
    /// Read, in this order of precedence (the first that sets a parameter
    /// wins):
    ///
    /// 1. the service's section of the service file, when `PGSERVICE`
    ///    names one (`PGSERVICEFILE`, else `~/.pg_service.conf`; then
    ///    `PGSYSCONFDIR/pg_service.conf`, else
    ///    `/etc/postgresql-common/pg_service.conf`);
    /// 2. `PGHOST`, `PGHOSTADDR`, `PGPORT`, `PGDATABASE`, `PGUSER`,
    ///    `PGPASSWORD`, `PGPASSFILE`, `PGOPTIONS`, `PGAPPNAME`,
    ///    `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`,
    ///    `PGSSLCRL`, `PGSSLCRLDIR`,
    ///    `PGSSLSNI`, `PGSSLCOMPRESSION`, `PGSSLMINPROTOCOLVERSION`,
    ///    `PGSSLMAXPROTOCOLVERSION`, `PGGSSENCMODE`, `PGCONNECT_TIMEOUT`,
    ///    `PGTARGETSESSIONATTRS`, `PGCHANNELBINDING`, `PGLOADBALANCEHOSTS`,
    ///    `PGSSLNEGOTIATION`;
    /// 3. the defaults: host = `/var/run/postgresql` or `/tmp` when a
    ///    server's socket for the port is there, else `localhost`; port
    ///    5432; user = the operating-system user; database = the user name;
    /// 4. for a password still missing, the password file (`PGPASSFILE`,
    ///    else `~/.pgpass`), ignored with a warning
    ///    ([`warnings`](Self::warnings), and a `tracing` warning) when its
    ///    group or others may access it.
    ///
    /// Errors name the parameter and where its value came from, never the
    /// value. Performs no network I/O.
    pub fn from_env() -> Result<Self> {
        Self::resolve(None, &LibpqEnv::from_process())
    }

    /// Parses `s` (a URL or a `key=value` string, possibly empty) and fills
    /// every parameter it does not set from libpq's environment, service
    /// file, defaults and password file (see [`from_env`](Self::from_env)):
    /// the string wins over the environment, the environment over the
    /// defaults, as in libpq.
    pub fn parse_with_env(s: &str) -> Result<Self> {
        Self::resolve(Some(s), &LibpqEnv::from_process())
    }

    /// [`parse_with_env`](Self::parse_with_env) over a given environment
    /// instead of the process's (tests, programs that keep their own).
    pub fn resolve(s: Option<&str>, env: &LibpqEnv) -> Result<Self> {
        Ok(Self::from_resolved(resolve(s, Some(env))?))
    }

    fn from_resolved(r: Resolved) -> Self {
        let mut o = Self::from_parts(r.config, r.tls);
        o.password_source = r.password_source;
        o.warnings = r.warnings;
        o
    }

    /// Where the password came from (`None`: there is none), for messages
    /// such as "check the password in ~/.pgpass".
    pub fn password_source(&self) -> Option<&PasswordSource> {
        self.password_source.as_ref()
    }

    /// What resolving had to say: a password file ignored for its
    /// permissions. Never contains a password.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Options from an already built driver config; the TLS mode is the
    /// config's own (`prefer` unless it says `disable` or `require`). A
    /// config with no host nor `hostaddr` gets the default host that
    /// [`parse`](Self::parse) gives a string without one.
    pub fn from_config(config: Config) -> Self {
        use tokio_postgres::config::SslMode as D;
        let mode = match config.get_ssl_mode() {
            D::Disable => SslMode::Disable,
            D::Require => SslMode::Require,
            _ => SslMode::Prefer,
        };
        Self::from_parts(
            config,
            TlsSettings {
                mode,
                ..TlsSettings::default()
            },
        )
    }

    pub(crate) fn from_parts(mut config: Config, tls: TlsSettings) -> Self {
        config.ssl_mode(tls.mode.driver_mode());
        // No host and no address: libpq's default, a local server's socket
        // directory (else `localhost`), as `parse_with_env` fills it; the
        // driver would refuse the config at the first connect.
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            let port = config.get_ports().first().copied().unwrap_or(5432);
            config.host(super::libpq_env::standard_default_host(port));
        }
        Self {
            config,
            tls,
            password_source: None,
            warnings: Vec::new(),
        }
    }

    /// The driver's settings (host, port, user, password, database,
    /// options, ...). Its `ssl_mode` is set from [`ConnectOptions::ssl_mode`].
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// libpq's `sslmode`.
    pub fn ssl_mode(&self) -> SslMode {
        self.tls.mode
    }

    /// libpq's `sslrootcert`, if given.
    pub fn ssl_root_cert(&self) -> Option<&std::path::Path> {
        self.tls.root_cert.as_deref()
    }

    /// Sets `application_name` (what `pg_stat_activity` shows for the
    /// sessions), keeping every other setting, TLS included.
    pub fn with_application_name(mut self, name: &str) -> Self {
        self.config.application_name(name);
        self
    }

    /// Replaces the TLS mode.
    pub fn with_ssl_mode(mut self, mode: SslMode) -> Self {
        self.tls.mode = mode;
        self.config.ssl_mode(mode.driver_mode());
        self
    }

    /// libpq's `sslcert` and `sslkey` (the client certificate and its
    /// key), if given. Without them, `~/.postgresql/postgresql.crt` and
    /// `postgresql.key` are used when the certificate exists.
    pub fn ssl_client_cert(&self) -> (Option<&std::path::Path>, Option<&std::path::Path>) {
        (
            self.tls.client_cert.as_deref(),
            self.tls.client_key.as_deref(),
        )
    }

    /// Replaces the client certificate and its private key (PEM files; the
    /// key may also be DER).
    pub fn with_ssl_client_cert(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.tls.client_cert = Some(cert.into());
        self.tls.client_key = Some(key.into());
        self
    }

    /// Replaces the CA file trusted by `verify-ca` / `verify-full`.
    pub fn with_ssl_root_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.root_cert = Some(path.into());
        self
    }

    /// The driver's config and the TLS settings to connect with.
    ///
    /// As libpq, `sslmode` does not apply to Unix-domain sockets
    /// (PostgreSQL has no TLS on them): when every host is a socket
    /// directory, the sessions connect without TLS whatever the mode, and
    /// `verify-ca` / `verify-full` need no CA file.
    pub(crate) fn into_parts(mut self) -> (Config, TlsSettings) {
        if super::hosts::every_host_is_a_socket(&self.config) {
            self.tls.mode = SslMode::Disable;
            self.config.ssl_mode(SslMode::Disable.driver_mode());
            // No TLS, so nothing to negotiate (libpq ignores it there too).
            self.config
                .ssl_negotiation(tokio_postgres::config::SslNegotiation::Postgres);
        }
        (self.config, self.tls)
    }
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Config's Debug redacts the password.
        f.debug_struct("ConnectOptions")
            .field("config", &self.config)
            .field("tls", &self.tls)
            .field("password_source", &self.password_source)
            .finish()
    }
}

impl From<Config> for ConnectOptions {
    /// [`ConnectOptions::from_config`].
    fn from(config: Config) -> Self {
        Self::from_config(config)
    }
}

impl std::str::FromStr for ConnectOptions {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ConnectOptions {
        ConnectOptions::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn urls_and_conninfo_strings_give_the_same_settings() {
        for s in [
            "postgres://app:s3cr%27t%20pw@db.example:6432/orders?sslmode=verify-ca&sslrootcert=%2Ftmp%2Fca%20x.pem&application_name=w%2B1",
            "host=db.example port=6432 user=app password='s3cr\\'t pw' dbname=orders sslmode=verify-ca sslrootcert='/tmp/ca x.pem' application_name=w+1",
        ] {
            let o = parse(s);
            let c = o.config();
            assert_eq!(c.get_user(), Some("app"), "{s}");
            assert_eq!(c.get_password(), Some(&b"s3cr't pw"[..]), "{s}");
            assert_eq!(c.get_ports(), &[6432], "{s}");
            assert_eq!(c.get_dbname(), Some("orders"), "{s}");
            assert_eq!(c.get_application_name(), Some("w+1"), "{s}");
            assert_eq!(o.ssl_mode(), SslMode::VerifyCa, "{s}");
            assert_eq!(o.ssl_root_cert().unwrap().to_str(), Some("/tmp/ca x.pem"), "{s}");
            assert_eq!(c.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        }
    }

    #[test]
    fn options_ipv6_unix_sockets_and_several_hosts_pass_through() {
        let o = parse("postgresql://u@[::1]:5433/db?options=-c%20statement_timeout%3D5s");
        assert_eq!(o.config().get_options(), Some("-c statement_timeout=5s"));
        assert_eq!(o.config().get_ports(), &[5433]);
        assert_eq!(o.ssl_mode(), SslMode::Prefer);
        let o = parse("postgres://u@/db?host=%2Fvar%2Frun%2Fpostgresql");
        assert!(matches!(
            o.config().get_hosts(),
            [tokio_postgres::config::Host::Unix(p)] if p.to_str() == Some("/var/run/postgresql")
        ));
        let o = parse("postgres://u@h1:5432,h2:5433/db?sslmode=require");
        assert_eq!(o.config().get_hosts().len(), 2);
        assert_eq!(o.ssl_mode(), SslMode::Require);
        assert_eq!(
            parse("postgres://h/db?sslmode=disable").ssl_mode(),
            SslMode::Disable
        );
        assert_eq!(
            parse("postgres://h/db?sslmode=verify-full").ssl_mode(),
            SslMode::VerifyFull
        );
    }

    #[test]
    fn bad_strings_are_refused_without_repeating_them() {
        for bad in [
            "postgres://u:hunter2@h/db?sslmode=sometimes",
            "postgres://u:hunter2@h/db?no_such_option=1",
            "postgres://u:hunter2%ff@h/db",
            "host=h password='hunter2",
            "host=h hunter2",
        ] {
            let err = ConnectOptions::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err:?}");
            assert!(!err.to_string().contains("hunter2"), "{bad}: {err}");
        }
    }
}
