//! The server-certificate check of the TLS sessions (`tls.rs`), as libpq makes it.
//!
//! webpki checks the chain and the subject alternative names. libpq
//! (through OpenSSL) accepts two certificates webpki refuses, and both are
//! what PostgreSQL's own documentation tells a user to make for a first
//! TLS setup (`openssl req -new -x509 ... -subj "/CN=dbhost"`, that
//! certificate copied to the client as its root):
//!
//! - **A self-signed server certificate listed in `sslrootcert` itself.**
//!   It is trusted as itself, even though it says it is a CA (OpenSSL's
//!   `req -x509` marks it so); webpki refuses a CA certificate as a
//!   server's. It must still be within its validity period.
//! - **The common name, when the certificate has no alternative name of
//!   the host's kind** (no DNS name for a host name, no IP address for an
//!   address): `verify-full` then compares the host with the subject's
//!   common name, `*.` wildcards as libpq allows them (one label).
//!
//! An X.509 version 1 certificate, which webpki cannot parse, is
//! `tls_v1.rs`'s: its handshake signature is checked there in every mode,
//! and the verifying modes refuse it by name, unless it is self-signed and
//! listed in `sslrootcert` itself (then trusted as itself, as above).

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{ASN1Time, FromDer, X509Certificate};

use super::tls_v1;

/// Checks the server certificate as the mode asks: not at all, the chain
/// only (`verify-ca`), or chain and name (`verify-full`). The handshake
/// signature is always checked against the presented certificate.
#[derive(Debug)]
pub(super) struct Verifier {
    /// The chain check, with the trusted certificates' own DER (for a
    /// self-signed server certificate trusted as itself); `None` checks
    /// nothing (`prefer`, `require`).
    chain: Option<(Arc<WebPkiServerVerifier>, Vec<CertificateDer<'static>>)>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl Verifier {
    /// A verifier that checks nothing but the handshake signature.
    pub(super) fn lax(provider: Arc<CryptoProvider>) -> Self {
        Self {
            chain: None,
            check_name: false,
            provider,
        }
    }

    /// A verifier of the chain to `roots` (`webpki` built from them), and
    /// of the host name when `check_name`.
    pub(super) fn verifying(
        webpki: Arc<WebPkiServerVerifier>,
        roots: Vec<CertificateDer<'static>>,
        check_name: bool,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        Self {
            chain: Some((webpki, roots)),
            check_name,
            provider,
        }
    }
}

fn is_name_error(e: &rustls::Error) -> bool {
    matches!(
        e,
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
        )
    )
}

fn is_ca_as_end_entity(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

/// libpq's wildcard rule: `*.example.com` matches `db.example.com`, not
/// `example.com` nor `a.b.example.com`; case does not matter.
fn dns_matches(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match pattern.strip_prefix('*') {
        Some(rest) if rest.starts_with('.') => host
            .strip_suffix(rest)
            .is_some_and(|label| !label.is_empty() && !label.contains('.')),
        _ => pattern == host,
    }
}

/// An iPAddress alternative name's address (4 or 16 bytes).
fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

/// Whether `cert` names `server` by libpq's rules: an alternative name of
/// the host's kind, or, when it has none of that kind, its common name.
fn names_host(cert: &X509Certificate<'_>, server: &ServerName<'_>) -> bool {
    let alt_names: &[GeneralName<'_>] = match cert.subject_alternative_name() {
        Ok(Some(ext)) => &ext.value.general_names,
        Ok(None) => &[],
        Err(_) => return false,
    };
    let (host, ip) = match server {
        ServerName::DnsName(d) => (d.as_ref().to_owned(), None),
        ServerName::IpAddress(a) => {
            let a = IpAddr::from(*a);
            (a.to_string(), Some(a))
        }
        _ => return false,
    };
    let mut of_kind = false;
    for name in alt_names {
        match (name, ip) {
            (GeneralName::DNSName(d), None) => {
                of_kind = true;
                if dns_matches(d, &host) {
                    return true;
                }
            }
            (GeneralName::IPAddress(bytes), Some(ip)) => {
                of_kind = true;
                if ip_of(bytes) == Some(ip) {
                    return true;
                }
            }
            _ => {}
        }
    }
    !of_kind
        && cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .any(|cn| dns_matches(cn, &host))
}

/// The names `cert` presents, for the error, as a person reads them
/// (`DNS name db.example.com`, `IP address 10.0.0.1`, `common name db`):
/// its alternative names, then its common names.
fn presented_names(cert: &X509Certificate<'_>) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(Some(ext)) = cert.subject_alternative_name() {
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => names.push(format!("DNS name {d}")),
                GeneralName::IPAddress(b) => {
                    if let Some(ip) = ip_of(b) {
                        names.push(format!("IP address {ip}"));
                    }
                }
                _ => {}
            }
        }
    }
    for cn in cert.subject().iter_common_name() {
        if let Ok(cn) = cn.as_str() {
            names.push(format!("common name {cn}"));
        }
    }
    names
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, rustls::Error> {
    X509Certificate::from_der(der.as_ref())
        .map(|(_, cert)| cert)
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some((webpki, roots)) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let e = match webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        let listed = roots.iter().any(|r| r == end_entity);
        let trusted_as_itself = listed
            && (is_ca_as_end_entity(&e)
                || (tls_v1::is_unsupported_version(&e)
                    && tls_v1::is_self_signed_version_1(end_entity)));
        if tls_v1::is_unsupported_version(&e) && !trusted_as_itself {
            return Err(tls_v1::refusal(end_entity, server_name));
        }
        if !is_name_error(&e) && !trusted_as_itself {
            return Err(e);
        }
        let cert = parse(end_entity)?;
        if trusted_as_itself {
            let at = ASN1Time::from_timestamp(now.as_secs() as i64)
                .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
            if !cert.validity().is_valid_at(at) {
                return Err(rustls::Error::InvalidCertificate(CertificateError::Expired));
            }
        }
        if !self.check_name || names_host(&cert, server_name) {
            return Ok(ServerCertVerified::assertion());
        }
        Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForNameContext {
                expected: server_name.to_owned(),
                presented: presented_names(&cert),
            },
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls_v1::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls_v1::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
#[path = "tls_verifier_tests.rs"]
pub(super) mod tests;
