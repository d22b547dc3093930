//! X.509 version 1 certificates, which webpki (rustls's certificate
//! checker) refuses to parse as anything but a trust anchor, and which
//! libpq (through OpenSSL) takes everywhere. `openssl x509 -req` without
//! `-extfile` makes one, and that is how PostgreSQL's documentation has a
//! user sign a server or client certificate with their own CA.
//!
//! - **The handshake signature** (`tls_verifier.rs`): every mode checks
//!   that the server holds the key of the certificate it presented. For a
//!   version 1 certificate that check is made here, against the
//!   certificate's public key (read with x509-parser), with the same
//!   algorithms; `prefer` and `require` without a root file then connect,
//!   as with libpq, which checks nothing more there.
//! - **The chain** (`verify-ca`, `verify-full`, `require` with a root
//!   file): webpki cannot check a version 1 server certificate, and no
//!   well-kept Rust verifier can; the certificate is refused with
//!   [`Version1`], which `tls_failure.rs` words with the way out (reissue
//!   it as version 3, or `require` without a root file). A version 1
//!   certificate that is itself listed in the root file is trusted as
//!   itself, as a self-signed version 3 one is.
//! - **A client certificate** of version 1 is sent as it is
//!   (`tls_client_cert.rs`): rustls need not parse its own certificate.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, SubjectPublicKeyInfoDer};
use rustls::{CertificateError, DigitallySignedStruct, OtherError};
use x509_parser::prelude::{FromDer, X509Certificate, X509Version};

/// Whether `e` is webpki's refusal of a certificate that is not version 3.
pub(super) fn is_unsupported_version(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::UnsupportedCertVersion)
        ),
        _ => false,
    }
}

/// Whether `der` is an X.509 version 1 certificate.
pub(super) fn is_version_1(der: &[u8]) -> bool {
    X509Certificate::from_der(der).is_ok_and(|(_, c)| c.version() == X509Version::V1)
}

/// Whether `der` is a self-signed (self-issued) version 1 certificate,
/// which, listed in the root file, is trusted as itself.
pub(super) fn is_self_signed_version_1(der: &[u8]) -> bool {
    X509Certificate::from_der(der).is_ok_and(|(_, c)| {
        c.version() == X509Version::V1 && c.subject().as_raw() == c.issuer().as_raw()
    })
}

/// The public key (SubjectPublicKeyInfo) of a certificate of any version.
pub(super) fn public_key(der: &[u8]) -> Option<SubjectPublicKeyInfoDer<'static>> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    Some(SubjectPublicKeyInfoDer::from(
        cert.public_key().raw.to_vec(),
    ))
}

/// A server's certificate chain that the verifying modes cannot check: the
/// server's certificate (or, `intermediate`, one of the CA certificates it
/// sent) is X.509 version 1.
#[derive(Debug)]
pub(super) struct Version1 {
    /// The name the certificate is checked for (its host or address), for
    /// the `subjectAltName` of the reissued one.
    pub(super) host: String,
    /// An intermediate CA's certificate is version 1, not the server's.
    pub(super) intermediate: bool,
    /// `host` is an IP address.
    pub(super) ip: bool,
}

impl fmt::Display for Version1 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("X.509 version 1 certificate")
    }
}

impl std::error::Error for Version1 {}

/// The refusal of `end_entity`'s chain for `server`: [`Version1`].
pub(super) fn refusal(end_entity: &[u8], server: &ServerName<'_>) -> rustls::Error {
    let (host, ip) = match server {
        ServerName::IpAddress(a) => (std::net::IpAddr::from(*a).to_string(), true),
        other => (other.to_str().into_owned(), false),
    };
    let v1 = Version1 {
        host,
        intermediate: !is_version_1(end_entity),
        ip,
    };
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(v1))))
}

/// webpki's error as rustls reports it (its own mapping is private; the
/// signature failures are the ones a handshake meets).
fn pki_error(e: webpki::Error) -> rustls::Error {
    match e {
        webpki::Error::InvalidSignatureForPublicKey => CertificateError::BadSignature.into(),
        webpki::Error::BadDer | webpki::Error::TrailingData(_) => {
            CertificateError::BadEncoding.into()
        }
        other => CertificateError::Other(OtherError(Arc::new(other))).into(),
    }
}

/// rustls's TLS 1.2 handshake-signature check, and for a version 1
/// certificate the same check against its public key.
pub(super) fn verify_tls12_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    match rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms) {
        Err(e) if is_unsupported_version(&e) => {}
        done => return done,
    }
    let spki = public_key(cert).ok_or(CertificateError::BadEncoding)?;
    let key = webpki::RawPublicKeyEntity::try_from(&spki).map_err(pki_error)?;
    // As rustls: TLS 1.2 names a scheme that may map to several algorithms
    // (the key's curve decides); the first that fits the key is the check.
    let candidates = algorithms
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map_or(&[][..], |(_, algs)| *algs);
    // None at all: rustls found the scheme before it met the version.
    let mut last = rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into();
    for alg in candidates {
        match key.verify_signature(*alg, message, dss.signature()) {
            Ok(()) => return Ok(HandshakeSignatureValid::assertion()),
            Err(e @ webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_)) => {
                last = pki_error(e);
            }
            Err(e) => return Err(pki_error(e)),
        }
    }
    Err(last)
}

/// rustls's TLS 1.3 handshake-signature check, and for a version 1
/// certificate the same check against its public key.
pub(super) fn verify_tls13_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    match rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms) {
        Err(e) if is_unsupported_version(&e) => {}
        done => return done,
    }
    let spki = public_key(cert).ok_or(CertificateError::BadEncoding)?;
    rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algorithms)
}

#[cfg(test)]
#[path = "tls_v1_tests.rs"]
mod tests;
