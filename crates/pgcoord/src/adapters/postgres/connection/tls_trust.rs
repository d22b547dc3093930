//! What a verifying TLS session (`verify-ca`, `verify-full`, and `require`
//! when a root file is there) trusts and distrusts: libpq's `sslrootcert`
//! (the CA certificates) and `sslcrl` / `sslcrldir` (certificate
//! revocation lists).
//!
//! libpq checks the server's chain against revocation lists when it has
//! any: `sslcrl` (a file), `sslcrldir` (a directory), or, when neither is
//! set, `~/.postgresql/root.crl` if that file exists. Every certificate of
//! the chain below the trusted one must then be covered by a list of its
//! issuer (OpenSSL's `CRL_CHECK_ALL`), and an expired list is refused.
//!
//! One difference, on purpose: libpq silently checks nothing when a named
//! `sslcrl` or `sslcrldir` is missing or holds no list. Here that is a
//! connect error naming the path: a revocation check the operator asked
//! for is never dropped without a word.
//!
//! A setting that cannot be used is a [`BackendErrorKind::Tls`] error
//! ([`tls_error`]).

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};
use rustls::RootCertStore;
use x509_parser::prelude::FromDer;
use x509_parser::revocation_list::CertificateRevocationList;

use crate::ports::error::{BackendError, BackendErrorKind};

/// A TLS setting that cannot be used (no socket opened): a
/// [`BackendErrorKind::Tls`] error, as retrying would not help until the
/// setting (or the file it names) changes.
pub(super) fn tls_error(msg: impl Into<String>) -> BackendError {
    BackendError::new(BackendErrorKind::Tls, msg)
}

/// `~/.postgresql/NAME` (libpq's default files), when the home directory is known.
pub(super) fn default_file(name: &str) -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".postgresql").join(name))
}

/// Whether there is a root file to check the server against: `sslrootcert`
/// (or `~/.postgresql/root.crt`) exists.
pub(super) fn root_file_present(path: Option<&Path>) -> bool {
    match path {
        Some(p) => p.exists(),
        None => default_file("root.crt").is_some_and(|f| f.exists()),
    }
}

/// libpq's (PostgreSQL 16) name for the operating system's CA store.
const SYSTEM: &str = "system";

/// Refuses `sslrootcert=system` whatever the `sslmode`. libpq 16 takes it
/// as "verify-full against the operating system's CA store" (and refuses
/// it with a weaker mode); this client has no such store, and a setting
/// that asks for verification must not quietly connect without it (or in
/// plaintext, under the default `prefer`).
pub(super) fn refuse_system_store(path: Option<&Path>) -> Result<(), BackendError> {
    match path {
        Some(p) if p == Path::new(SYSTEM) => Err(tls_error(format!(
            "sslrootcert=system is not supported: {SYSTEM_STORE_WHY}"
        ))),
        _ => Ok(()),
    }
}

/// Why `sslrootcert=system` is refused, and what to write instead.
pub(super) const SYSTEM_STORE_WHY: &str = "libpq 16's operating-system CA store, which this \
     client does not load, whatever the sslmode; name a file of the CA certificates to trust, \
     with sslmode=verify-full";

/// The trusted certificates of `sslrootcert` (or libpq's default file),
/// as a store and as their own DER.
pub(super) fn load_roots(
    path: Option<&Path>,
) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), BackendError> {
    let default;
    let path = match path {
        Some(p) => p,
        None => {
            default = default_file("root.crt").ok_or_else(|| {
                tls_error("sslmode verify-ca/verify-full needs sslrootcert (no HOME for ~/.postgresql/root.crt)")
            })?;
            &default
        }
    };
    refuse_system_store(Some(path))?;
    let mut roots = RootCertStore::empty();
    let mut ders = Vec::new();
    for cert in read_certs(path, "sslrootcert")? {
        roots
            .add(cert.clone())
            .map_err(|e| tls_error(format!("bad certificate in {}: {e}", path.display())))?;
        ders.push(cert);
    }
    if roots.is_empty() {
        return Err(tls_error(format!(
            "no certificate in sslrootcert {}",
            path.display()
        )));
    }
    Ok((roots, ders))
}

/// The certificates in `path` (the file of parameter `what`, named in
/// errors): PEM, or a single DER certificate (a file without PEM armour),
/// as the private key may be. Empty when there is none.
pub(super) fn read_certs(
    path: &Path,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, BackendError> {
    let bytes = std::fs::read(path)
        .map_err(|e| tls_error(format!("cannot read {what} {}: {e}", path.display())))?;
    if bytes.windows(10).any(|w| w == b"-----BEGIN") {
        return CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error(format!("bad certificate in {what} {}: {e}", path.display())));
    }
    match x509_parser::certificate::X509Certificate::from_der(&bytes) {
        Ok(([], _)) => Ok(vec![CertificateDer::from(bytes)]),
        _ => Ok(Vec::new()),
    }
}

/// The revocation lists of `sslcrl` and `sslcrldir`, or of
/// `~/.postgresql/root.crl` when neither is set and it exists; empty when
/// there are none to check against.
pub(super) fn load_crls(
    file: Option<&Path>,
    dir: Option<&Path>,
) -> Result<Vec<CertificateRevocationListDer<'static>>, BackendError> {
    let mut crls = Vec::new();
    if let Some(file) = file {
        crls.extend(named(crls_in_file(file, "sslcrl")?, || {
            format!("sslcrl {}", file.display())
        })?);
    }
    if let Some(dir) = dir {
        crls.extend(named(crls_in_dir(dir)?, || {
            format!("sslcrldir {}", dir.display())
        })?);
    }
    if file.is_none() && dir.is_none() {
        if let Some(default) = default_file("root.crl").filter(|f| f.is_file()) {
            let found = crls_in_file(&default, "the default revocation list")?;
            crls.extend(named(found, || {
                format!("{} (libpq's default sslcrl)", default.display())
            })?);
        }
    }
    Ok(crls)
}

/// `found`, unless it is empty: a place named for lists that holds none
/// is an error naming it (`what`).
fn named<T>(found: Vec<T>, what: impl FnOnce() -> String) -> Result<Vec<T>, BackendError> {
    match found.is_empty() {
        true => Err(tls_error(format!(
            "no certificate revocation list in {}",
            what()
        ))),
        false => Ok(found),
    }
}

/// The lists of one file: its `X509 CRL` PEM sections, or, when it has no
/// PEM section at all, the whole file as one DER list.
fn crls_in_file(
    path: &Path,
    what: &str,
) -> Result<Vec<CertificateRevocationListDer<'static>>, BackendError> {
    let bytes = std::fs::read(path)
        .map_err(|e| tls_error(format!("cannot read {what} {}: {e}", path.display())))?;
    let bad = |why: String| tls_error(format!("bad revocation list in {}: {why}", path.display()));
    let mut crls = Vec::new();
    let mut any_pem = false;
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes) {
        let (kind, der) = section.map_err(|e| bad(e.to_string()))?;
        any_pem = true;
        if kind == SectionKind::Crl {
            crls.push(CertificateRevocationListDer::from(der));
        }
    }
    if !any_pem && !bytes.is_empty() {
        crls.push(CertificateRevocationListDer::from(bytes));
    }
    for crl in &crls {
        let (_, parsed) = CertificateRevocationList::from_der(crl.as_ref())
            .map_err(|e| bad(format!("not a certificate revocation list ({e})")))?;
        usable_by_webpki(path, &parsed, crl.as_ref())?;
    }
    Ok(crls)
}

/// Refuses a list that rustls's certificate checker (webpki) cannot read,
/// naming `path`. It reads version-2 lists with extensions only (RFC 5280's
/// profile); OpenSSL, and so libpq, also reads version 1, which is what
/// `openssl ca -gencrl` writes when its configuration sets no `crlnumber`.
fn usable_by_webpki(
    path: &Path,
    parsed: &CertificateRevocationList<'_>,
    der: &[u8],
) -> Result<(), BackendError> {
    use x509_parser::x509::X509Version;
    let v2 = parsed.version() == Some(X509Version::V2);
    if v2 && webpki::BorrowedCertRevocationList::from_der(der).is_ok() {
        return Ok(());
    }
    let what = match v2 {
        true => {
            "a version-2 revocation list that this client's TLS library (rustls) cannot \
             read: it needs RFC 5280's profile (a next-update time, a CRL number extension)"
        }
        false => {
            "a version-1 revocation list, which this client's TLS library (rustls) cannot \
             read (libpq can)"
        }
    };
    Err(tls_error(format!(
        "cannot use the revocation list in {}: it is {what}; make a version-2 one: with \
         `openssl ca -gencrl`, set `crlnumber = FILE` (a file holding a number such as 01) in \
         the CA section of its configuration",
        path.display()
    )))
}

/// The lists of every file of `dir` (an OpenSSL hashed directory keeps
/// them as `HASH.rN`, possibly beside CA certificates, which are skipped).
fn crls_in_dir(dir: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, BackendError> {
    let cannot =
        |e: std::io::Error| tls_error(format!("cannot read sslcrldir {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(cannot)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(cannot)?;
    files.retain(|f| f.is_file());
    files.sort();
    let mut crls = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file)
            .map_err(|e| tls_error(format!("cannot read {} in sslcrldir: {e}", file.display())))?;
        // Only PEM lists: a DER file here could as well be a certificate.
        let has_crl = <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes)
            .any(|s| matches!(s, Ok((SectionKind::Crl, _))));
        if has_crl {
            crls.extend(crls_in_file(&file, "a revocation list")?);
        }
    }
    Ok(crls)
}

#[cfg(test)]
#[path = "tls_trust_tests.rs"]
mod tests;
