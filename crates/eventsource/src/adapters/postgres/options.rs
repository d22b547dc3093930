//! [`ConnectOptions`]: the one parser of PostgreSQL connection strings, for
//! the lock manager and the read-model pool alike.
//!
//! A `postgres://` / `postgresql://` URL is read with the `url` crate; its
//! user name, password, database name and query values are
//! percent-decoded with `percent-encoding` (`+` stays a plus, as libpq has
//! it). A `key=value` string (libpq's conninfo, values optionally in single
//! quotes) is split respecting the quotes. Either way libpq's `sslmode`
//! (`disable` .. `verify-full`) and `sslrootcert`, which tokio-postgres
//! refuses or ignores, are taken out into [`TlsSettings`]; every other
//! parameter (`options`, `application_name`, `connect_timeout`, ...) goes to
//! tokio-postgres's own parser unchanged, so what it accepts and rejects is
//! the driver's rule. Errors never repeat the string (it may hold a
//! password).

use std::fmt;
use std::path::PathBuf;

use percent_encoding::percent_decode_str;
use tokio_postgres::Config;

use super::tls::{SslMode, TlsSettings};
use crate::ports::error::{Error, Result};

/// A parsed connection string: the driver's settings and the TLS settings.
///
/// ```
/// use eventsource::adapters::postgres::{ConnectOptions, SslMode};
/// let o = ConnectOptions::parse(
///     "postgres://app:p%40ss@db.internal:6432/orders?sslmode=verify-full&sslrootcert=/etc/ca.pem&options=-c%20search_path%3Dread",
/// )?;
/// assert_eq!(o.config().get_password(), Some(&b"p@ss"[..]));
/// assert_eq!(o.config().get_dbname(), Some("orders"));
/// assert_eq!(o.config().get_options(), Some("-c search_path=read"));
/// assert_eq!(o.ssl_mode(), SslMode::VerifyFull);
/// assert_eq!(o.ssl_root_cert().unwrap().to_str(), Some("/etc/ca.pem"));
/// # Ok::<(), eventsource::Error>(())
/// ```
#[derive(Clone)]
pub struct ConnectOptions {
    config: Config,
    tls: TlsSettings,
}

impl ConnectOptions {
    /// Parses a `postgres://` URL or a `key=value` connection string.
    ///
    /// Fails with [`Error::InvalidArgument`] for a malformed string, an
    /// unknown `sslmode`, or a parameter tokio-postgres does not know; the
    /// message never repeats the string.
    pub fn parse(s: &str) -> Result<Self> {
        let (conninfo, tls) = if is_url(s) {
            from_url(s)?
        } else {
            from_conninfo(s)?
        };
        let config: Config = conninfo.parse().map_err(|e| invalid(format!("{e}")))?;
        Ok(Self::from_parts(config, tls))
    }

    /// Options from an already built driver config; the TLS mode is the
    /// config's own (`prefer` unless it says `disable` or `require`).
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
                root_cert: None,
            },
        )
    }

    pub(crate) fn from_parts(mut config: Config, tls: TlsSettings) -> Self {
        config.ssl_mode(tls.mode.driver_mode());
        Self { config, tls }
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

    /// Replaces the TLS mode.
    pub fn with_ssl_mode(mut self, mode: SslMode) -> Self {
        self.tls.mode = mode;
        self.config.ssl_mode(mode.driver_mode());
        self
    }

    /// Replaces the CA file trusted by `verify-ca` / `verify-full`.
    pub fn with_ssl_root_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.root_cert = Some(path.into());
        self
    }

    pub(crate) fn into_parts(self) -> (Config, TlsSettings) {
        (self.config, self.tls)
    }
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Config's Debug redacts the password.
        f.debug_struct("ConnectOptions")
            .field("config", &self.config)
            .field("tls", &self.tls)
            .finish()
    }
}

impl std::str::FromStr for ConnectOptions {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

fn invalid(why: String) -> Error {
    Error::InvalidArgument(format!("not a valid PostgreSQL connection string: {why}"))
}

fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

fn decode(raw: &str, what: &str) -> Result<String> {
    percent_decode_str(raw)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| invalid(format!("the {what} is not UTF-8 once percent-decoded")))
}

/// Quotes a conninfo value: `'...'` with `\` and `'` escaped.
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Takes the TLS parameters; true when `key` was one.
fn take_tls(key: &str, value: &str, tls: &mut TlsSettings) -> Result<bool> {
    match key {
        "sslmode" => {
            tls.mode = SslMode::parse(value)
                .ok_or_else(|| invalid(format!("invalid sslmode {value:?}")))?;
            Ok(true)
        }
        "sslrootcert" => {
            tls.root_cert = Some(PathBuf::from(value));
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// A URL as a conninfo string for tokio-postgres, and its TLS settings.
fn from_url(s: &str) -> Result<(String, TlsSettings)> {
    let mut tls = TlsSettings::default();
    let mut parts: Vec<String> = Vec::new();
    let (base, query) = match url::Url::parse(s) {
        Ok(url) => {
            if !url.username().is_empty() {
                parts.push(format!(
                    "user={}",
                    quote(&decode(url.username(), "user name")?)
                ));
            }
            if let Some(pw) = url.password() {
                parts.push(format!("password={}", quote(&decode(pw, "password")?)));
            }
            if let Some(host) = url.host_str().filter(|h| !h.is_empty()) {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                parts.push(format!("host={}", quote(&decode(host, "host")?)));
            }
            if let Some(port) = url.port() {
                parts.push(format!("port={port}"));
            }
            let db = url.path().trim_start_matches('/');
            if !db.is_empty() {
                parts.push(format!("dbname={}", quote(&decode(db, "database name")?)));
            }
            (None, url.query().map(str::to_owned))
        }
        // Several hosts (`h1:5432,h2:5433`), which the url crate does not
        // take: the driver's own URL parser reads the part before `?`.
        Err(_) => match s.split_once('?') {
            Some((base, query)) => (Some(base.to_owned()), Some(query.to_owned())),
            None => (Some(s.to_owned()), None),
        },
    };
    let mut kept_raw: Vec<&str> = Vec::new();
    if let Some(query) = &query {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(k, "parameter name")?;
            let value = decode(v, "parameter value")?;
            if take_tls(&key, &value, &mut tls)? {
                continue;
            }
            if base.is_some() {
                kept_raw.push(pair);
            } else {
                parts.push(format!("{key}={}", quote(&value)));
            }
        }
    }
    let conninfo = match base {
        None => parts.join(" "),
        Some(base) if kept_raw.is_empty() => base,
        Some(base) => format!("{base}?{}", kept_raw.join("&")),
    };
    Ok((conninfo, tls))
}

/// A `key=value` string without its TLS parameters, and those parameters.
fn from_conninfo(s: &str) -> Result<(String, TlsSettings)> {
    let mut tls = TlsSettings::default();
    let mut kept = Vec::new();
    for (key, value, raw) in conninfo_pairs(s)? {
        if !take_tls(&key, &value, &mut tls)? {
            kept.push(raw);
        }
    }
    Ok((kept.join(" "), tls))
}

/// The `key=value` pairs of a conninfo string: (key, unquoted value, the
/// pair as written).
fn conninfo_pairs(s: &str) -> Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(invalid("a parameter has no `=`".into()));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    None => return Err(invalid("unterminated quoted value".into())),
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => value.push(c),
                        None => return Err(invalid("unterminated quoted value".into())),
                    },
                    Some((_, c)) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(s.len(), |&(i, _)| i);
        out.push((key, value, s[start..end].trim_end().to_owned()));
    }
    Ok(out)
}

/// `sslmode` and `sslrootcert` out of a connection string; the rest of the
/// string as written. For [`split_ssl_params`](super::split_ssl_params).
pub(crate) fn split_tls(s: &str) -> Result<(String, TlsSettings, bool)> {
    if is_url(s) {
        let (base, query) = match s.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (s, None),
        };
        let mut tls = TlsSettings::default();
        let mut saw_mode = false;
        let mut kept = Vec::new();
        for pair in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(k, "parameter name")?;
            saw_mode |= key == "sslmode";
            if !take_tls(&key, &decode(v, "parameter value")?, &mut tls)? {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok((rest, tls, saw_mode))
    } else {
        let saw_mode = conninfo_pairs(s)?.iter().any(|(k, _, _)| k == "sslmode");
        let (rest, tls) = from_conninfo(s)?;
        Ok((rest, tls, saw_mode))
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

    #[test]
    fn split_tls_keeps_the_rest_as_written() {
        let (rest, tls, saw) = split_tls(
            "postgres://u:p@h:5/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca%20x.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p@h:5/db?application_name=x");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert!(saw);
        assert_eq!(tls.root_cert.unwrap().to_str(), Some("/tmp/ca x.pem"));
        let (rest, tls, saw) =
            split_tls("host=h dbname=d sslmode=verify-ca sslrootcert=/ca.pem user=u").unwrap();
        assert_eq!(rest, "host=h dbname=d user=u");
        assert_eq!(tls.mode, SslMode::VerifyCa);
        assert!(saw);
        let (rest, _, saw) = split_tls("postgres://h/db").unwrap();
        assert_eq!((rest.as_str(), saw), ("postgres://h/db", false));
        assert!(split_tls("postgres://h/db?sslmode=sometimes").is_err());
        assert!(split_tls("postgres://h/db?sslrootcert=%ff").is_err());
    }
}
