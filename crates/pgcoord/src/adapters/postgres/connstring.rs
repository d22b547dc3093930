//! Splitting a PostgreSQL connection string (a `postgres://` URL or a
//! `key=value` conninfo string) into what tokio-postgres parses and libpq's
//! TLS parameters ([`TlsSettings`]); [`split_ssl_params`], the public form.
//! [`ConnectOptions`](super::ConnectOptions) is built on it.

use std::path::PathBuf;

use percent_encoding::percent_decode_str;

use super::tls::{SslMode, TlsSettings};
use crate::ports::error::{Error, Result};

/// The connection string without its TLS parameters, and those parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SslParams {
    /// The rest of the connection string, for `tokio_postgres::Config`'s parser.
    pub rest: String,
    /// `sslmode`, if given.
    pub mode: Option<SslMode>,
    /// `sslrootcert`, if given.
    pub root_cert: Option<PathBuf>,
}

/// Takes libpq's `sslmode` and `sslrootcert` out of a `postgres://` URL or a
/// `key=value` connection string: tokio-postgres refuses `verify-ca` and
/// `verify-full` and ignores `sslrootcert`. For tools that need the
/// `tokio_postgres::Config` themselves; pass what is found to
/// [`ssl_mode`](super::PostgresLockManagerBuilder::ssl_mode) and
/// [`ssl_root_cert`](super::PostgresLockManagerBuilder::ssl_root_cert).
/// [`ConnectOptions::parse`](super::ConnectOptions::parse) does all of it in
/// one step. Errors never repeat the string (it may hold a password).
pub fn split_ssl_params(url: &str) -> crate::Result<SslParams> {
    let (rest, tls, saw_mode) = split_tls(url)?;
    Ok(SslParams {
        rest,
        mode: saw_mode.then_some(tls.mode),
        root_cert: tls.root_cert,
    })
}

pub(super) fn invalid(why: String) -> Error {
    Error::InvalidArgument(format!("not a valid PostgreSQL connection string: {why}"))
}

pub(super) fn is_url(s: &str) -> bool {
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
pub(super) fn from_url(s: &str) -> Result<(String, TlsSettings)> {
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
pub(super) fn from_conninfo(s: &str) -> Result<(String, TlsSettings)> {
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
/// string as written. For [`split_ssl_params`].
fn split_tls(s: &str) -> Result<(String, TlsSettings, bool)> {
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
