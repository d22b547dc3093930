//! Which failed connects are TLS's, and how to tell them to a person.
//!
//! A certificate the settings do not accept (an unknown CA, another host's
//! name, expired, revoked), a handshake the server refuses (no TLS version
//! in common, a client certificate it will not take), or a server without
//! TLS where `sslmode` requires it: none of these gets better by trying
//! again, so they are [`BackendErrorKind::Tls`](crate::ports::error::BackendErrorKind::Tls),
//! not `Connect`. A connection reset or closed during the handshake (a
//! server restarting, a failover) is no TLS failure: it stays a connect
//! error, worth retrying.
//!
//! The words are ours, not rustls's variant names (`UnknownIssuer`,
//! `DnsName("...")`): what was refused and which setting it comes from.

use std::error::Error as StdError;
use std::io;
use std::path::{Path, PathBuf};

use rustls::pki_types::UnixTime;
use rustls::{AlertDescription, CertificateError};

use super::tls::{SslMode, TlsSettings};
use super::tls_v1::Version1;

/// What the words for a TLS failure need to know of the settings.
pub(super) struct TlsContext {
    /// libpq's `sslmode` name (`require`, `verify-full`, ...).
    pub(super) mode: &'static str,
    /// The root file the server's chain is checked against: `sslrootcert`,
    /// or libpq's default `~/.postgresql/root.crt`.
    pub(super) root_file: Option<PathBuf>,
}

impl TlsContext {
    pub(super) fn of(settings: &TlsSettings) -> Self {
        let mode = match settings.mode {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        };
        let root_file = settings
            .root_cert
            .clone()
            .or_else(|| super::tls_trust::default_file("root.crt"));
        Self { mode, root_file }
    }
}

/// tokio-postgres's text for every TLS error, and its text (the cause's)
/// for a server that answered "no" to the TLS request.
const HANDSHAKE: &str = "error performing TLS handshake";
const NO_TLS: &str = "server does not support TLS";
/// Its text for a handshake it will not start, the host having no name:
/// a host given by address alone under `verify-full` (`connect.rs` names
/// such a host by its address under the other modes, as libpq does).
const NO_NAME: &str = "no hostname provided for TLS handshake";

/// The words for `e`, a failed connect, when it is a TLS failure; `None`
/// for any other failure (an io error during the handshake included).
pub(super) fn tls_failure(e: &(dyn StdError + 'static), cx: &TlsContext) -> Option<String> {
    if let Some(tls) = rustls_error(e) {
        return describe(tls, cx);
    }
    if e.to_string() != HANDSHAKE {
        return None;
    }
    match e.source().map(|cause| cause.to_string()).as_deref() {
        Some(NO_TLS) => Some(format!(
            "the server does not offer TLS, and sslmode={} needs it (is the server's ssl \
             setting on?)",
            cx.mode
        )),
        Some(NO_NAME) => Some(format!(
            "sslmode={} checks the server's certificate against the host's name, and the host \
             is given by address alone (hostaddr, PGHOSTADDR): set host (PGHOST) to the name \
             the certificate carries, or use sslmode=verify-ca",
            cx.mode
        )),
        _ => None,
    }
}

/// The driver's text (the cause of its authentication error) for a login
/// that `channel_binding=require` refuses.
const NOT_BOUND: &str = "server did not use channel binding";

/// How a refused login's connect went, for [`channel_binding_refused`].
pub(super) struct Attempt {
    /// The session was over TLS (its handshake succeeded).
    pub(super) tls_in_use: bool,
    /// The host was a Unix-domain socket.
    pub(super) socket: bool,
}

/// The words for `e` when `channel_binding=require` refused the login,
/// saying whether TLS was in use (what to change differs); `None` for
/// any other failure. libpq says the same in its own words ("channel
/// binding required, but SSL not in use").
pub(super) fn channel_binding_refused(
    e: &tokio_postgres::Error,
    cx: &TlsContext,
    attempt: &Attempt,
) -> Option<String> {
    let cause = e.source().map(|c| c.to_string());
    if e.as_db_error().is_some() || cause.as_deref() != Some(NOT_BOUND) {
        return None;
    }
    Some(unbound_login(cx, attempt))
}

/// The words for a login that `channel_binding=require` refused, the
/// connect having gone as `attempt` says.
///
/// Over TLS, the driver cannot tell which of two things happened: the
/// server let the client in without SCRAM (a pg_hba.conf method other
/// than scram-sha-256), or what answered offered SCRAM-SHA-256 alone,
/// without its channel-bound variant SCRAM-SHA-256-PLUS. The second is
/// what a pooler does: PgBouncer ends the client's TLS itself and does not
/// offer SCRAM-SHA-256-PLUS, which binds to a TLS session with the server
/// itself. So both are named.
fn unbound_login(cx: &TlsContext, attempt: &Attempt) -> String {
    let why = if attempt.tls_in_use {
        "TLS was in use, and the login was not a channel-bound SCRAM one: either the server \
         let this client in without SCRAM (its pg_hba.conf method for this user is not \
         scram-sha-256: cert, trust, md5 or password), or what answered offers SCRAM-SHA-256 \
         without channel binding (SCRAM-SHA-256-PLUS, which needs TLS to the server itself; \
         a pooler such as PgBouncer does not offer it)"
            .to_owned()
    } else if attempt.socket {
        "TLS was not in use: the host is a Unix-domain socket, where PostgreSQL has no TLS"
            .to_owned()
    } else {
        format!(
            "TLS was not in use (sslmode={}{})",
            cx.mode,
            match cx.mode {
                "prefer" => ", and the server did not offer it",
                _ => "",
            }
        )
    };
    format!(
        "channel_binding=require refused the login: {why}; only a SCRAM login over TLS binds \
         to the channel"
    )
}

/// The rustls error in `e`'s chain. `io::Error::source` skips the error it
/// wraps (it gives that error's own source), so each io error's inner
/// error is looked at too.
fn rustls_error<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut link = Some(e);
    while let Some(err) = link {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(inner) = err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            if let Some(tls) = rustls_error(inner) {
                return Some(tls);
            }
        }
        link = err.source();
    }
    None
}

/// The words for a rustls error; `None` for a peer that does not speak
/// TLS at all after saying it would (`connect.rs` calls that a server that
/// is not PostgreSQL).
fn describe(e: &rustls::Error, cx: &TlsContext) -> Option<String> {
    Some(match e {
        rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => return None,
        rustls::Error::InvalidCertificate(c) => certificate(c, cx),
        rustls::Error::AlertReceived(alert) => refused(*alert),
        rustls::Error::NoCertificatesPresented => "the server presented no certificate".to_owned(),
        rustls::Error::InvalidCertRevocationList(why) => format!(
            "a certificate revocation list (sslcrl, sslcrldir) cannot be used: {}",
            readable(format!("{why:?}"))
        ),
        rustls::Error::PeerIncompatible(why) => format!(
            "the server's TLS is not compatible with this client's ({})",
            readable(format!("{why:?}"))
        ),
        other => format!("the TLS handshake failed: {other}"),
    })
}

/// Why the server's certificate was refused.
fn certificate(e: &CertificateError, cx: &TlsContext) -> String {
    let refused = "the server's certificate was refused";
    match e {
        CertificateError::UnknownIssuer => format!(
            "{refused}: it is not signed by a CA that {} trusts",
            root_file(cx.root_file.as_deref())
        ),
        CertificateError::Other(other)
            if matches!(
                other.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ) =>
        {
            format!(
                "{refused}: it is a CA certificate (self-signed?) that {} does not list",
                root_file(cx.root_file.as_deref())
            )
        }
        CertificateError::Other(other) if other.0.downcast_ref::<Version1>().is_some() => {
            let v1 = other.0.downcast_ref::<Version1>().expect("matched");
            format!("{refused}: {}", version_1(v1, cx))
        }
        CertificateError::Expired => format!("{refused}: it has expired"),
        CertificateError::ExpiredContext { not_after, .. } => {
            format!("{refused}: it expired on {}", date(*not_after))
        }
        CertificateError::NotValidYet => format!("{refused}: it is not valid yet"),
        CertificateError::NotValidYetContext { not_before, .. } => {
            format!("{refused}: it is not valid before {}", date(*not_before))
        }
        CertificateError::Revoked => {
            format!("{refused}: it has been revoked (by a revocation list of sslcrl or sslcrldir)")
        }
        CertificateError::UnknownRevocationStatus => format!(
            "{refused}: no revocation list (sslcrl, sslcrldir) of its issuer says whether it \
             is revoked"
        ),
        CertificateError::ExpiredRevocationList
        | CertificateError::ExpiredRevocationListContext { .. } => {
            format!("{refused}: the revocation list (sslcrl, sslcrldir) that covers it has expired")
        }
        CertificateError::NotValidForName => format!("{refused}: it does not name the host"),
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            let names = match presented.as_slice() {
                [] => "no name".to_owned(),
                names => names.join(", "),
            };
            format!(
                "{refused}: it does not name the host \"{}\" that was asked for (it names {names})",
                expected.to_str()
            )
        }
        CertificateError::Other(other) => format!("{refused}: {}", readable(other.0.to_string())),
        other => format!("{refused}: {}", readable(other.to_string())),
    }
}

/// Why a version 1 certificate cannot be checked, and the two ways out:
/// reissue it as version 3 (`openssl x509 -req` with `-extfile`, as
/// PostgreSQL's documentation signs it but with extensions), or, where the
/// certificate need not be checked, `require` without a root file.
fn version_1(v1: &Version1, cx: &TlsContext) -> String {
    let which = match v1.intermediate {
        true => "a CA certificate of its chain (one the server sent) is",
        false => "it is",
    };
    let checked = match cx.mode {
        "require" => format!(
            "sslmode=require checks the chain because there is a root file, {}",
            root_file(cx.root_file.as_deref())
        ),
        mode => format!(
            "sslmode={mode} checks it against {}",
            root_file(cx.root_file.as_deref())
        ),
    };
    let reissue = match v1.intermediate {
        true => "reissue that CA certificate as version 3 (openssl x509 -req ... -extfile \
                 <(printf 'basicConstraints=critical,CA:TRUE'))"
            .to_owned(),
        false => format!(
            "reissue it as version 3 (openssl x509 -req -in server.csr -CA ca.crt -CAkey \
             ca.key -days 365 -out server.crt -extfile <(printf \
             'basicConstraints=CA:FALSE\\nsubjectAltName={}:{}'))",
            if v1.ip { "IP" } else { "DNS" },
            v1.host
        ),
    };
    format!(
        "{which} an X.509 version 1 certificate, which this client cannot verify ({checked}); \
         {reissue}, or connect with sslmode=require and no root file (no sslrootcert, no \
         ~/.postgresql/root.crt), which encrypts without verifying the certificate"
    )
}

/// What an alert from the server says: it refused the handshake.
fn refused(alert: AlertDescription) -> String {
    let why = match alert {
        AlertDescription::ProtocolVersion => {
            "no TLS version both sides accept (ssl_min_protocol_version, \
             ssl_max_protocol_version, and the server's own)"
                .to_owned()
        }
        AlertDescription::CertificateRequired => {
            "it requires a client certificate (sslcert, sslkey)".to_owned()
        }
        AlertDescription::UnknownCA
        | AlertDescription::BadCertificate
        | AlertDescription::UnsupportedCertificate
        | AlertDescription::CertificateRevoked
        | AlertDescription::CertificateExpired
        | AlertDescription::CertificateUnknown => format!(
            "it does not accept the client certificate (sslcert): {}",
            readable(format!("{alert:?}"))
        ),
        other => readable(format!("{other:?}")),
    };
    format!("the server refused the TLS handshake: {why}")
}

/// `sslrootcert PATH`, or `sslrootcert` when the path is not known.
fn root_file(path: Option<&Path>) -> String {
    match path {
        Some(p) => format!("sslrootcert {}", p.display()),
        None => "sslrootcert".to_owned(),
    }
}

fn date(t: UnixTime) -> String {
    i64::try_from(t.as_secs())
        .ok()
        .and_then(|s| x509_parser::time::ASN1Time::from_timestamp(s).ok())
        .map_or_else(|| format!("{} (UNIX time)", t.as_secs()), |d| d.to_string())
}

/// `text` as it is, unless it is one variant name (`BadSignature`): then
/// as words (`bad signature`).
fn readable(text: String) -> String {
    match text.chars().all(char::is_alphanumeric) {
        true => words(&text),
        false => text,
    }
}

/// A variant name as words: `UnknownCA` -> `unknown CA`,
/// `CertificateRequired` -> `certificate required`.
fn words(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
        let prev_lower = i > 0 && chars[i - 1].is_lowercase();
        if c.is_uppercase() && i > 0 && (prev_lower || next_lower) {
            out.push(' ');
        }
        out.push(c);
    }
    // Lower-case the words that are not acronyms.
    out.split(' ')
        .map(|w| match w.chars().nth(1) {
            Some(second) if second.is_lowercase() => w.to_lowercase(),
            _ => w.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
#[path = "tls_failure_tests.rs"]
mod tests;
