//! Splitting a PostgreSQL connection string (a `postgres://` URL or a
//! `key=value` conninfo string) into what tokio-postgres parses and libpq's
//! TLS parameters ([`TlsSettings`]); [`split_ssl_params`], the public form.
//! [`ConnectOptions`](crate::adapters::postgres::ConnectOptions) is built on it.

use std::path::PathBuf;

use percent_encoding::percent_decode_str;

pub(super) use super::conninfo::invalid;
use super::conninfo::{conninfo_pairs, query_pairs};
use super::tls::{SslMode, TlsSettings};
use crate::ports::error::Result;

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
    /// `sslcert` (the client certificate), if given.
    pub client_cert: Option<PathBuf>,
    /// `sslkey` (the client certificate's key), if given.
    pub client_key: Option<PathBuf>,
    /// `sslcrl` (a file of certificate revocation lists), if given.
    pub crl: Option<PathBuf>,
    /// `sslcrldir` (a directory of them), if given.
    pub crl_dir: Option<PathBuf>,
}

/// Takes libpq's `sslmode`, `sslrootcert`, `sslcert`, `sslkey`, `sslcrl`
/// and `sslcrldir` out of a `postgres://` URL or a `key=value` connection
/// string: tokio-postgres refuses `verify-ca` and
/// `verify-full` and ignores `sslrootcert`. For tools that need the
/// `tokio_postgres::Config` themselves; pass what is found to
/// [`ssl_mode`](crate::adapters::postgres::PostgresLockManagerBuilder::ssl_mode) and
/// [`ssl_root_cert`](crate::adapters::postgres::PostgresLockManagerBuilder::ssl_root_cert).
/// [`ConnectOptions::parse`](crate::adapters::postgres::ConnectOptions::parse) does all of it in
/// one step. Errors never repeat the string (it may hold a password).
pub fn split_ssl_params(url: &str) -> crate::Result<SslParams> {
    let (rest, tls, saw_mode) = split_tls(url)?;
    Ok(SslParams {
        rest,
        mode: saw_mode.then_some(tls.mode),
        root_cert: tls.root_cert,
        client_cert: tls.client_cert,
        client_key: tls.client_key,
        crl: tls.crl,
        crl_dir: tls.crl_dir,
    })
}

pub(super) fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// Percent-decodes a URL part as strictly as libpq: a `%` not followed by
/// two hex digits, and `%00`, are errors (the `percent-encoding` crate
/// would pass the first through as written).
fn decode(raw: &str, what: &str) -> Result<String> {
    let bytes = raw.as_bytes();
    for (i, _) in raw.match_indices('%') {
        match bytes.get(i + 1..i + 3) {
            Some(b"00") => {
                return Err(invalid(format!(
                    "the {what} holds %00 (a zero byte), which PostgreSQL does not allow"
                )))
            }
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => {}
            _ => {
                return Err(invalid(format!(
                    "the {what} has a `%` not followed by two hex digits \
                     (a `%` of its own is written %25)"
                )))
            }
        }
    }
    percent_decode_str(raw)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| invalid(format!("the {what} is not UTF-8 once percent-decoded")))
}

/// Quotes a conninfo value: `'...'` with `\` and `'` escaped.
pub(super) fn quote(value: &str) -> String {
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
            // The value is not repeated: with a `?` in a password written
            // unencoded, what looks like a value may be the password's tail.
            tls.mode = SslMode::parse(value).ok_or_else(|| {
                invalid(
                    "invalid value for connection parameter `sslmode`: expected disable, \
                     allow, prefer, require, verify-ca or verify-full"
                        .into(),
                )
            })?;
            Ok(true)
        }
        "sslrootcert" => {
            tls.root_cert = Some(PathBuf::from(value));
            Ok(true)
        }
        "sslcert" => {
            tls.client_cert = Some(PathBuf::from(value));
            Ok(true)
        }
        "sslkey" => {
            tls.client_key = Some(PathBuf::from(value));
            Ok(true)
        }
        "sslcrl" => {
            tls.crl = (!value.is_empty()).then(|| PathBuf::from(value));
            Ok(true)
        }
        "sslcrldir" => {
            tls.crl_dir = (!value.is_empty()).then(|| PathBuf::from(value));
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The parameters of a connection string, in order: a URL's user,
/// password, hosts, ports and database (percent-decoded) followed by its
/// query parameters, or a `key=value` string's pairs (unquoted).
pub(super) fn params(s: &str) -> Result<Vec<(String, String)>> {
    if is_url(s) {
        url_params(s)
    } else {
        Ok(conninfo_pairs(s)?
            .into_iter()
            .map(|(k, v, _)| (k, v))
            .collect())
    }
}

/// A URL's parameters, read by libpq's URI grammar (not the WHATWG one
/// of the `url` crate, which drops tabs and line breaks, folds `//` and
/// `..` in the path and cuts the string at a `#`; libpq does none of it):
/// after `scheme://`, the text up to the first `@` (when one comes before
/// any `/`) is `user[:password]`, so a `?`, `#`, `[`, `]` or `:` in a
/// password is the password's (a `/` or `@` is written %2F or %40); then
/// the host list up to `/` or `?`; the database name up to `?`,
/// percent-decoded as it is (`//postgres` is the database `/postgres`);
/// the query parameters.
fn url_params(s: &str) -> Result<Vec<(String, String)>> {
    refuse_tabs_and_line_breaks(s)?;
    let (userinfo, rest) = split_credentials(s);
    refuse_at_after_credentials(rest)?;
    let mut out = Vec::new();
    if let Some(userinfo) = userinfo {
        // libpq: the user name runs to the first `:`, the password to the `@`.
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            out.push(("user".to_owned(), decode(user, "user name")?));
        }
        if let Some(pw) = password.filter(|p| !p.is_empty()) {
            out.push(("password".to_owned(), decode(pw, "password")?));
        }
    }
    let authority_end = host_list_len(rest);
    let hostlist = &rest[..authority_end];
    let (mut hosts, mut ports) = (Vec::new(), Vec::new());
    for spec in hostlist.split(',') {
        let (host, port) = match spec.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6
                    .split_once(']')
                    .ok_or_else(|| invalid("an IPv6 host has no closing `]`".into()))?;
                if host.is_empty() {
                    return Err(invalid("IPv6 host address may not be empty (`[]`)".into()));
                }
                (host, after.strip_prefix(':').unwrap_or(after))
            }
            None => spec.split_once(':').unwrap_or((spec, "")),
        };
        hosts.push(decode(host, "host")?);
        ports.push(decode(port, "port")?);
    }
    if hosts.iter().any(|h| !h.is_empty()) {
        out.push(("host".to_owned(), hosts.join(",")));
    }
    if ports.iter().any(|p| !p.is_empty()) {
        out.push(("port".to_owned(), ports.join(",")));
    }
    let after_hosts = &rest[authority_end..];
    let (path, query) = match after_hosts.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (after_hosts, None),
    };
    // The database name is everything after the first `/`, as written.
    let db = path.strip_prefix('/').unwrap_or(path);
    if !db.is_empty() {
        out.push(("dbname".to_owned(), decode(db, "database name")?));
    }
    for (_, k, v) in query_pairs(query.unwrap_or(""))? {
        out.push((decode(k, "parameter name")?, decode(v, "parameter value")?));
    }
    Ok(out)
}

/// The length of the host list at the start of `rest` (a URL after its
/// credentials): up to a `/` or `?` outside brackets. As in libpq, a `[`
/// opens brackets only at the start of a host (`[::1]`, `[/tmp/dir]`, a
/// socket directory); inside a name (`h[db?x`) it is the name's.
fn host_list_len(rest: &str) -> usize {
    let (mut in_brackets, mut host_start) = (false, true);
    rest.bytes()
        .position(|b| {
            in_brackets = if in_brackets {
                b != b']'
            } else {
                host_start && b == b'['
            };
            host_start = b == b',';
            !in_brackets && (b == b'/' || b == b'?')
        })
        .unwrap_or(rest.len())
}

/// Where the query of `rest` (a URL after its credentials) begins: at the
/// first `?` after the host list.
fn query_start(rest: &str) -> Option<usize> {
    let hosts = host_list_len(rest);
    rest[hosts..].find('?').map(|i| hosts + i)
}

/// A URL's `user[:password]` part as libpq finds it (the text before the
/// first `@`, when an `@` comes before any `/`) and the rest after the `@`.
fn split_credentials(url: &str) -> (Option<&str>, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    match rest.find(['@', '/']) {
        Some(at) if rest.as_bytes()[at] == b'@' => (Some(&rest[..at]), &rest[at + 1..]),
        _ => (None, rest),
    }
}

/// A URL with an `@` after libpq's credentials and before its `?` (in the
/// host list or the database name) is refused: it is almost always an
/// unencoded `@` or `/` in a password (`u:2024/Secret@h/db`, `u:a@b@h/db`),
/// which libpq would read as a host or a database name, and which would
/// then be shown. A deliberate difference from libpq; the message never
/// repeats the URL's text.
fn refuse_at_after_credentials(rest: &str) -> Result<()> {
    let before_query = rest.split_once('?').map_or(rest, |(b, _)| b);
    if before_query.contains('@') {
        return Err(invalid(
            "the URL has an `@` after its user name and password (in the host list or the \
             database name); an `@` or `/` in a user name or password is written %40 or %2F"
                .into(),
        ));
    }
    Ok(())
}

/// The (decoded) names of a URL's query parameters written before its
/// last `@`. With a `/` in a password, libpq's rule ends the credentials
/// early and the password's tail may be read as parameters; a message
/// never repeats these names (the tool shows the URL masked to its last
/// `@`).
pub(super) fn names_before_last_at(s: &str) -> Vec<String> {
    let Some(last_at) = s.rfind('@').filter(|_| is_url(s)) else {
        return Vec::new();
    };
    let (_, rest) = split_credentials(s);
    let Some(query) = query_start(rest).map(|q| s.len() - rest.len() + q + 1) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut at = query;
    for pair in s[query..].split('&') {
        if at < last_at {
            let name = pair.split_once('=').map_or(pair, |(k, _)| k);
            names.push(decode(name, "parameter name").unwrap_or_default());
        }
        at += pair.len() + 1;
    }
    names
}

/// A URL with an ASCII tab, carriage return or line feed is refused: libpq
/// keeps them (and the server then knows no such database), a URL parser
/// drops them, and either way it is rarely what was meant (a line break
/// copied along with the URL).
fn refuse_tabs_and_line_breaks(url: &str) -> Result<()> {
    if url.contains(['\t', '\n', '\r']) {
        return Err(invalid(
            "the URL holds a tab or a line break; remove it, or write it percent-encoded \
             (%09, %0A, %0D) where it belongs to a value"
                .into(),
        ));
    }
    Ok(())
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

/// `sslmode` and `sslrootcert` out of a connection string; the rest of the
/// string as written. For [`split_ssl_params`].
fn split_tls(s: &str) -> Result<(String, TlsSettings, bool)> {
    if is_url(s) {
        refuse_tabs_and_line_breaks(s)?;
        // The query begins at the first `?` after the host list (a
        // password may hold a `?`, and so may a bracketed host).
        let (_, after_credentials) = split_credentials(s);
        refuse_at_after_credentials(after_credentials)?;
        let query_at =
            query_start(after_credentials).map(|i| s.len() - after_credentials.len() + i);
        let (base, query) = match query_at {
            Some(i) => (&s[..i], Some(&s[i + 1..])),
            None => (s, None),
        };
        let mut tls = TlsSettings::default();
        let mut saw_mode = false;
        let mut kept = Vec::new();
        for (pair, k, v) in query_pairs(query.unwrap_or(""))? {
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
#[path = "connstring_tests.rs"]
mod tests;
