//! The client certificate of the TLS sessions (`tls.rs`), found as libpq finds it:
//! libpq's `sslcert` and `sslkey` (`PGSSLCERT`, `PGSSLKEY`), by default
//! `~/.postgresql/postgresql.crt` and `postgresql.key`.
//!
//! The key may be PEM or DER, as libpq takes it, but not encrypted (libpq's
//! `sslpassword`): that is an error saying so.
//!
//! As in libpq, a certificate file that does not exist means no client
//! certificate (the server may not ask for one); a certificate without its
//! key, an unreadable file, or a key file others may read is an error
//! before any connection is made.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::tls_trust::{default_file, read_certs, tls_error};
use crate::ports::error::BackendError;

/// A client certificate chain and its private key, with the files they
/// came from (for messages).
pub(super) struct Identity {
    pub(super) certs: Vec<CertificateDer<'static>>,
    pub(super) key: PrivateKeyDer<'static>,
    cert_path: PathBuf,
    key_path: PathBuf,
}

impl std::fmt::Debug for Identity {
    /// The files, never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The certificate and its key as rustls signs with them, once the
    /// key is known to be the certificate's.
    ///
    /// Not rustls's `with_client_auth_cert`: that parses the certificate
    /// with webpki, which refuses an X.509 version 1 one (what
    /// `openssl x509 -req` makes without `-extfile`), and says so as an
    /// "invalid peer certificate". libpq sends such a certificate, and
    /// servers take it; here the key is compared with the certificate's
    /// public key read by x509-parser, which reads every version.
    pub(super) fn certified(self, provider: &CryptoProvider) -> Result<CertifiedKey, BackendError> {
        let signing = provider
            .key_provider
            .load_private_key(self.key)
            .map_err(|e| {
                tls_error(format!(
                    "cannot use sslkey {}: not a key this client can sign with ({})",
                    self.key_path.display(),
                    plain(&e)
                ))
            })?;
        let cert_key = super::tls_v1::public_key(&self.certs[0]).ok_or_else(|| {
            tls_error(format!(
                "cannot read sslcert {}: its first certificate is not an X.509 certificate",
                self.cert_path.display()
            ))
        })?;
        // A key whose public half rustls cannot derive is taken on trust,
        // as rustls itself does; the server then refuses a wrong one.
        if signing.public_key().is_some_and(|k| k != cert_key) {
            return Err(tls_error(format!(
                "sslkey {} is not the private key of the certificate in sslcert {}",
                self.key_path.display(),
                self.cert_path.display()
            )));
        }
        Ok(CertifiedKey::new(self.certs, signing))
    }
}

/// A rustls error in words: its text, unless that is a Debug dump.
fn plain(e: &rustls::Error) -> String {
    match e {
        rustls::Error::General(why) => why.clone(),
        other => other.to_string(),
    }
}

/// The client certificate of `cert` and `key`, ready to sign with; see
/// [`client_identity`] and [`Identity::certified`].
pub(super) fn client_certified_key(
    cert: Option<&Path>,
    key: Option<&Path>,
    provider: &CryptoProvider,
) -> Result<Option<Arc<CertifiedKey>>, BackendError> {
    match client_identity(cert, key)? {
        Some(identity) => Ok(Some(Arc::new(identity.certified(provider)?))),
        None => Ok(None),
    }
}

/// The client certificate `cert` and key `key` (libpq's `sslcert` and
/// `sslkey`), or libpq's default files; `None` when the certificate file
/// does not exist.
pub(super) fn client_identity(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<Identity>, BackendError> {
    let Some(cert_path) = cert
        .map(Path::to_owned)
        .or_else(|| default_file("postgresql.crt"))
    else {
        return Ok(None);
    };
    if !cert_path.exists() {
        return Ok(None);
    }
    let certs = read_certs(&cert_path, "sslcert")?;
    if certs.is_empty() {
        return Err(tls_error(format!(
            "no certificate in sslcert {}",
            cert_path.display()
        )));
    }
    let key_path = key
        .map(Path::to_owned)
        .or_else(|| default_file("postgresql.key"))
        .ok_or_else(|| {
            tls_error(format!(
                "certificate {} present, but no sslkey (and no HOME for ~/.postgresql/postgresql.key)",
                cert_path.display()
            ))
        })?;
    if !key_path.exists() {
        return Err(tls_error(format!(
            "certificate {} present, but not its private key file {}",
            cert_path.display(),
            key_path.display()
        )));
    }
    check_key_permissions(&key_path)?;
    Ok(Some(Identity {
        certs,
        key: read_key(&key_path)?,
        cert_path,
        key_path,
    }))
}

/// The private key of `sslkey`: PEM (PKCS#8, PKCS#1 or SEC1) or, as libpq
/// also takes it, DER. A key encrypted with a passphrase (libpq's
/// `sslpassword`) is refused by name: this client cannot decrypt it.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, BackendError> {
    let cannot = |why: String| tls_error(format!("cannot read sslkey {}: {why}", path.display()));
    let bytes = std::fs::read(path).map_err(|e| cannot(e.to_string()))?;
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if has(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || has(b"Proc-Type: 4,ENCRYPTED") {
        return Err(cannot(
            "it is encrypted with a passphrase, which this client cannot use (libpq's \
             sslpassword); store it decrypted, readable by its owner only: \
             openssl pkey -in KEY -out KEY.plain && chmod 0600 KEY.plain"
                .to_owned(),
        ));
    }
    if has(b"-----BEGIN") {
        return PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| cannot(e.to_string()));
    }
    PrivateKeyDer::try_from(bytes)
        .map_err(|e| cannot(format!("neither a PEM nor a DER private key ({e})")))
}

/// libpq's rule: a key file owned by this user may be read by nobody else
/// (0600 or less), one owned by root by its group at most (0640 or less).
#[cfg(unix)]
fn check_key_permissions(path: &Path) -> Result<(), BackendError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| tls_error(format!("cannot read sslkey {}: {e}", path.display())))?;
    if meta.is_dir() {
        return Err(tls_error(format!(
            "sslkey {} is a directory, not a private key file",
            path.display()
        )));
    }
    let mode = meta.mode() & 0o777;
    let allowed = if meta.uid() == 0 { 0o640 } else { 0o600 };
    if mode & !allowed != 0 {
        return Err(tls_error(format!(
            "private key file {} has group or world access (mode {mode:o}); it must be \
             u=rw (0600) or less if owned by the current user, or u=rw,g=r (0640) or less \
             if owned by root",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_key_permissions(_path: &Path) -> Result<(), BackendError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    /// A fresh directory of this test's own.
    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pgcoord-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_missing_certificate_is_no_certificate_and_a_missing_key_an_error() {
        let dir = dir("client-cert-missing");
        let (cert, key) = (dir.join("c.crt"), dir.join("c.key"));
        assert!(client_identity(Some(&cert), Some(&key)).unwrap().is_none());
        let pair = rcgen::generate_simple_self_signed(vec!["app".to_owned()]).unwrap();
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        let err = client_identity(Some(&cert), Some(&key)).unwrap_err();
        assert!(err.message().contains("private key file"), "{err}");
        std::fs::write(&key, pair.key_pair.serialize_pem()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let identity = client_identity(Some(&cert), Some(&key)).unwrap().unwrap();
        assert_eq!(identity.certs.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_der_certificate_is_read_and_a_directory_as_key_named_as_such() {
        let dir = dir("client-cert-der");
        let (cert, key) = (dir.join("c.der"), dir.join("c.key"));
        let pair = rcgen::generate_simple_self_signed(vec!["app".to_owned()]).unwrap();
        std::fs::write(&cert, pair.cert.der()).unwrap();
        std::fs::write(&key, pair.key_pair.serialize_pem()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let identity = client_identity(Some(&cert), Some(&key)).unwrap().unwrap();
        assert_eq!(identity.certs, vec![pair.cert.der().clone()]);
        let garbage = dir.join("g.crt");
        std::fs::write(&garbage, b"not a certificate").unwrap();
        let err = client_identity(Some(&garbage), Some(&key)).unwrap_err();
        assert!(err.message().contains("no certificate in sslcert"), "{err}");
        let err = client_identity(Some(&cert), Some(&dir)).unwrap_err();
        assert!(
            err.message()
                .contains("is a directory, not a private key file"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_der_key_is_read_and_an_encrypted_one_refused_by_name() {
        let dir = dir("client-key-forms");
        let (cert, key) = (dir.join("c.crt"), dir.join("c.key"));
        let pair = rcgen::generate_simple_self_signed(vec!["app".to_owned()]).unwrap();
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        std::fs::write(&key, pair.key_pair.serialize_der()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let got = client_identity(Some(&cert), Some(&key)).unwrap().unwrap();
        assert_eq!(got.key.secret_der(), pair.key_pair.serialized_der());
        std::fs::write(
            &key,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = client_identity(Some(&cert), Some(&key)).unwrap_err();
        assert!(
            err.message().contains("encrypted with a passphrase"),
            "{err}"
        );
        std::fs::write(&key, b"\x01\x02 neither").unwrap();
        let err = client_identity(Some(&cert), Some(&key)).unwrap_err();
        assert!(err.message().contains("neither a PEM nor a DER"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_key_others_may_read_is_refused_as_libpq_refuses_it() {
        let dir = dir("client-key-mode");
        let (cert, key) = (dir.join("c.crt"), dir.join("c.key"));
        let pair = rcgen::generate_simple_self_signed(vec!["app".to_owned()]).unwrap();
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        std::fs::write(&key, pair.key_pair.serialize_pem()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let owner_is_root = std::fs::metadata(&key).map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == 0
        });
        let err = client_identity(Some(&cert), Some(&key)).unwrap_err();
        assert!(err.message().contains("group or world access"), "{err}");
        // Root's own key may be read by its group, not by others.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(
            client_identity(Some(&cert), Some(&key)).is_ok(),
            owner_is_root.unwrap()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `openssl x509 -req` without `-extfile` makes a version 1
    /// certificate, which libpq sends and rustls's own loading refused as
    /// an "invalid peer certificate"; a key that is not the certificate's
    /// is still caught before connecting.
    #[test]
    fn a_version_1_certificate_is_usable_and_a_key_of_another_refused() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls-v1");
        let dir = dir("client-cert-v1");
        let (key, other_key) = (dir.join("client.key"), dir.join("server.key"));
        for (from, to) in [("client-v1.key", &key), ("server-v1.key", &other_key)] {
            std::fs::copy(fixtures.join(from), to).unwrap();
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let cert = fixtures.join("client-v1.crt");
        let provider = rustls::crypto::ring::default_provider();
        let certified = client_certified_key(Some(&cert), Some(&key), &provider)
            .unwrap()
            .unwrap();
        assert_eq!(certified.cert.len(), 1);
        let err = client_certified_key(Some(&cert), Some(&other_key), &provider).unwrap_err();
        let text = err.message();
        assert!(
            text.contains("is not the private key of the certificate in sslcert")
                && text.contains("server.key")
                && text.contains("client-v1.crt"),
            "{text}"
        );
        assert!(!text.contains("peer") && !text.contains("Other("), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
