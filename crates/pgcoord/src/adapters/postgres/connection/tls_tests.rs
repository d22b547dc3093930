use super::*;
use crate::ports::error::BackendErrorKind;

#[test]
fn modes_parse_as_libpq_names_them() {
    assert_eq!(SslMode::parse("verify-full"), Some(SslMode::VerifyFull));
    assert_eq!(SslMode::parse("verify-ca"), Some(SslMode::VerifyCa));
    assert_eq!(SslMode::parse("allow"), Some(SslMode::Prefer));
    assert_eq!(SslMode::parse("VERIFY-FULL"), None);
    assert_eq!(SslMode::default(), SslMode::Prefer);
}

#[test]
fn missing_root_certificate_is_a_tls_error_naming_the_file() {
    let settings = TlsSettings {
        mode: SslMode::VerifyFull,
        root_cert: Some(PathBuf::from("/nonexistent/eventsource-ca.pem")),
        ..TlsSettings::default()
    };
    let err = MakeRustls::new(settings).ready().unwrap_err();
    assert_eq!(err.kind(), BackendErrorKind::Tls);
    assert!(
        err.message().contains("/nonexistent/eventsource-ca.pem"),
        "{err}"
    );
    // Modes that verify nothing need no file.
    let lax = TlsSettings {
        mode: SslMode::Require,
        root_cert: Some(PathBuf::from("/nonexistent/eventsource-ca.pem")),
        ..TlsSettings::default()
    };
    assert!(MakeRustls::new(lax).ready().is_ok());
}

#[test]
fn sslsni_reaches_the_rustls_configuration() {
    let config = |no_sni| {
        client_config(&TlsSettings {
            no_sni,
            versions: TlsVersions::Tls13,
            ..TlsSettings::default()
        })
        .unwrap()
    };
    assert!(config(false).enable_sni);
    assert!(!config(true).enable_sni);
}

#[cfg(unix)]
#[test]
fn a_unix_socket_gets_a_connector_without_any_tls_configuration() {
    // Nothing is loaded for a socket; a TCP host needs the configuration.
    let mut make = MakeRustls::new(TlsSettings::default());
    let socket = MakeTlsConnect::<tokio::net::UnixStream>::make_tls_connect(&mut make, "");
    assert!(socket.is_ok());
    let tcp = MakeTlsConnect::<tokio::net::TcpStream>::make_tls_connect(&mut make, "db");
    assert!(tcp.is_err());
}
