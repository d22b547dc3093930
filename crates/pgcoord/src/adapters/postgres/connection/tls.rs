//! TLS for the lock sessions (and their query cancels) and the read-model
//! pool, on rustls.
//!
//! libpq's `sslmode` and `sslrootcert`, which tokio-postgres does not know
//! (it parses `sslmode` only up to `require` and ignores `sslrootcert`):
//!
//! | `sslmode`     | TLS                         | certificate checked            |
//! |---------------|-----------------------------|--------------------------------|
//! | `disable`     | never                       | —                              |
//! | `prefer`      | if the server offers it     | no                             |
//! | `require`     | always                      | chain, if a root file is there |
//! | `verify-ca`   | always                      | chain to `sslrootcert`         |
//! | `verify-full` | always                      | chain and host name            |
//!
//! `sslrootcert` names a PEM file of trusted CA certificates; without it,
//! `~/.postgresql/root.crt` as libpq does. The verifying modes also check
//! the chain against `sslcrl` / `sslcrldir` (or `~/.postgresql/root.crl`)
//! when there are revocation lists ([`tls_trust`](super::tls_trust)).
//! SCRAM binds to the TLS session (`-PLUS`) where the server offers it
//! ([`tls_channel_binding`](super::tls_channel_binding)).
//!
//! A small `MakeTlsConnect` of our own rather than `tokio-postgres-rustls`:
//! `verify-ca` needs a verifier that checks the chain but not the name,
//! `prefer`/`require` one that checks nothing, and `verify-full` libpq's
//! rules where they differ from webpki's ([`tls_verifier`](super::tls_verifier)),
//! which that crate lacks.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use super::tls_trust::{load_crls, load_roots, refuse_system_store, root_file_present, tls_error};
use super::tls_verifier::Verifier;
use crate::ports::error::BackendError;

/// How a session uses TLS, as libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Never.
    Disable,
    /// When the server offers it, without checking its certificate
    /// (libpq's default).
    #[default]
    Prefer,
    /// Always; the certificate is not checked, unless there is a root file
    /// (`sslrootcert` exists, or `~/.postgresql/root.crt`): then its chain
    /// is checked as `VerifyCa` checks it, as libpq does.
    Require,
    /// Always; the certificate must chain to a trusted CA.
    VerifyCa,
    /// Always; the certificate must chain to a trusted CA and name the host.
    VerifyFull,
}

impl SslMode {
    /// Parses a libpq `sslmode` value (`allow` counts as `prefer`).
    pub fn parse(s: &str) -> Option<SslMode> {
        Some(match s {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// The driver's own mode: whether to try TLS, and whether to insist.
    pub(crate) fn driver_mode(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as D;
        match self {
            SslMode::Disable => D::Disable,
            SslMode::Prefer => D::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => D::Require,
        }
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// libpq's rule for `sslnegotiation=direct` (see `tls_options.rs`, which
/// applies it to the parameters with their sources) on a built driver
/// config and TLS `mode`: for options changed after parsing
/// (`with_ssl_mode`, a builder's `ssl_mode`, a `tokio_postgres::Config`),
/// before any connection.
pub(crate) fn refuse_weak_direct(
    config: &tokio_postgres::Config,
    mode: SslMode,
) -> Result<(), String> {
    use tokio_postgres::config::SslNegotiation;
    let weak = match mode {
        SslMode::Disable => "disable",
        SslMode::Prefer => "prefer",
        _ => return Ok(()),
    };
    match config.get_ssl_negotiation() {
        SslNegotiation::Direct => Err(format!(
            "weak sslmode \"{weak}\" may not be used with sslnegotiation=direct: direct \
             negotiation opens every connection with the TLS handshake, so use sslmode \
             require, verify-ca or verify-full, or the default negotiation"
        )),
        _ => Ok(()),
    }
}

/// TLS settings of a manager.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub(crate) mode: SslMode,
    pub(crate) root_cert: Option<PathBuf>,
    /// libpq's `sslcert`: the client certificate (default
    /// `~/.postgresql/postgresql.crt`, used when it exists).
    pub(crate) client_cert: Option<PathBuf>,
    /// libpq's `sslkey`: its private key (default
    /// `~/.postgresql/postgresql.key`).
    pub(crate) client_key: Option<PathBuf>,
    /// libpq's `sslcrl`: a file of certificate revocation lists (PEM or
    /// DER); see [`tls_trust`](super::tls_trust).
    pub(crate) crl: Option<PathBuf>,
    /// libpq's `sslcrldir`: a directory of them (PEM files).
    pub(crate) crl_dir: Option<PathBuf>,
    /// libpq's `ssl_min_protocol_version` / `ssl_max_protocol_version`,
    /// within what rustls speaks (TLS 1.2 and 1.3).
    pub(crate) versions: TlsVersions,
    /// libpq's `sslsni=0`: no server name in the handshake.
    pub(crate) no_sni: bool,
}

/// The TLS versions a session may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TlsVersions {
    /// TLS 1.2 or 1.3 (libpq's default minimum is TLS 1.2).
    #[default]
    Any,
    /// `ssl_max_protocol_version=TLSv1.2`.
    Tls12,
    /// `ssl_min_protocol_version=TLSv1.3`.
    Tls13,
}

/// rustls with *ring*, named explicitly: the crate-features default would
/// panic when another crate of the application also turns on aws-lc-rs.
/// rustls 0.23.48 deprecates this function (ring has no post-quantum key
/// exchange) without a ring replacement; the allow keeps `cargo update`
/// from failing the `-D warnings` build until the switch to aws-lc-rs,
/// which compiles C and is a decision of its own.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls configuration for `settings`.
fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, BackendError> {
    refuse_system_store(settings.root_cert.as_deref())?;
    let provider = provider();
    let versions: &[&rustls::SupportedProtocolVersion] = match settings.versions {
        TlsVersions::Any => rustls::DEFAULT_VERSIONS,
        TlsVersions::Tls12 => &[&rustls::version::TLS12],
        TlsVersions::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| tls_error(format!("TLS setup failed: {e}")))?;
    // As libpq: `require` checks the chain too when there is a root file
    // (libpq keeps this for compatibility with its older releases).
    let check_chain = settings.mode.verifies()
        || (settings.mode == SslMode::Require && root_file_present(settings.root_cert.as_deref()));
    let verifier: Arc<dyn ServerCertVerifier> = if check_chain {
        let (roots, ders) = load_roots(settings.root_cert.as_deref())?;
        let crls = load_crls(settings.crl.as_deref(), settings.crl_dir.as_deref())?;
        let mut webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone());
        if !crls.is_empty() {
            // As libpq (OpenSSL's CRL_CHECK_ALL): the whole chain, an
            // unknown status refused (the default), an expired list too.
            webpki = webpki.with_crls(crls).enforce_revocation_expiration();
        }
        let webpki = webpki
            .build()
            .map_err(|e| tls_error(format!("TLS setup failed: {e}")))?;
        let check_name = settings.mode == SslMode::VerifyFull;
        Arc::new(Verifier::verifying(
            webpki,
            ders,
            check_name,
            provider.clone(),
        ))
    } else {
        Arc::new(Verifier::lax(provider.clone()))
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match super::tls_client_cert::client_certified_key(
        settings.client_cert.as_deref(),
        settings.client_key.as_deref(),
        &provider,
    )? {
        Some(certified) => builder
            .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified))),
        None => builder.with_no_client_auth(),
    };
    config.enable_sni = !settings.no_sni;
    Ok(Arc::new(config))
}

/// The `MakeTlsConnect` of the lock sessions and their cancels. The rustls
/// configuration (and with it `sslrootcert`) is loaded at the first
/// connection, and again after a failure (a missing file may appear).
#[derive(Clone)]
pub(crate) struct MakeRustls {
    /// Shared by every clone (one per pool and manager): the settings are
    /// read only when the configuration is (re)loaded.
    settings: Arc<TlsSettings>,
    config: Arc<Mutex<Option<Arc<ClientConfig>>>>,
    /// Set when a handshake of this clone's connects succeeds (see
    /// [`watched`](Self::watched)).
    handshake: Option<Arc<AtomicBool>>,
}

impl MakeRustls {
    pub(crate) fn new(settings: TlsSettings) -> Self {
        Self {
            settings: Arc::new(settings),
            config: Arc::new(Mutex::new(None)),
            handshake: None,
        }
    }

    /// A clone for one connect attempt, and a flag it sets once its TLS
    /// handshake succeeds: whether that attempt's session was over TLS
    /// (the driver's errors do not say).
    pub(crate) fn watched(&self) -> (Self, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        let mut watched = self.clone();
        watched.handshake = Some(flag.clone());
        (watched, flag)
    }

    /// The settings the configuration is loaded from.
    pub(crate) fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// Loads the configuration now (for a typed connect error naming the
    /// file, before any socket is opened).
    pub(crate) fn ready(&self) -> Result<(), BackendError> {
        // Needed with `disable` too: the driver asks for a connector per
        // host before it knows whether it will use it.
        let mut slot = self.config.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(client_config(&self.settings)?);
        }
        Ok(())
    }

    fn current(&self) -> Option<Arc<ClientConfig>> {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        // Asked for a Unix-domain socket too (no host name), where
        // PostgreSQL has no TLS: that connector is never used.
        if domain.is_empty() {
            return Ok(RustlsConnect {
                target: None,
                handshake: None,
            });
        }
        let config = self
            .current()
            .ok_or_else(|| io::Error::other("TLS is not configured"))?;
        let name = ServerName::try_from(domain.to_owned()).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("host {domain:?}: {e}"))
        })?;
        Ok(RustlsConnect {
            target: Some((config, name)),
            handshake: self.handshake.clone(),
        })
    }
}

/// One TLS handshake to a named server (none for a Unix-domain socket).
pub(crate) struct RustlsConnect {
    target: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    handshake: Option<Arc<AtomicBool>>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let (config, name) = self
                .target
                .ok_or_else(|| io::Error::other("no TLS on a Unix-domain socket"))?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await?;
            if let Some(flag) = self.handshake {
                flag.store(true, Ordering::Relaxed);
            }
            Ok(RustlsStream(stream))
        })
    }
}

/// A TLS session to the server.
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// `tls-server-end-point` from the server's certificate, so that SCRAM
    /// can bind to this TLS session (`SCRAM-SHA-256-PLUS`).
    fn channel_binding(&self) -> ChannelBinding {
        match self.0.get_ref().1.peer_certificates() {
            Some([server, ..]) => super::tls_channel_binding::server_end_point(server),
            _ => ChannelBinding::none(),
        }
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
