use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::path::PathBuf;

use rustls::pki_types::ServerName;
use rustls::{AlertDescription, CertificateError};

use super::{tls_failure, unbound_login, words, Attempt, TlsContext};

/// A driver error as tokio-postgres makes one: its own text, and the cause
/// it was given (boxed).
#[derive(Debug)]
struct Driver {
    text: &'static str,
    cause: Box<dyn StdError + Send + Sync>,
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

impl StdError for Driver {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.cause)
    }
}

/// A handshake that failed with `cause`, as tokio-rustls and tokio-postgres
/// wrap it.
fn handshake(cause: impl StdError + Send + Sync + 'static) -> Driver {
    Driver {
        text: "error performing TLS handshake",
        cause: Box::new(cause),
    }
}

const CX: TlsContext = TlsContext {
    mode: "verify-full",
    root_file: None,
};

fn words_for(e: &Driver) -> Option<String> {
    tls_failure(e, &CX)
}

#[test]
fn a_certificate_error_inside_an_io_error_is_a_tls_failure_naming_the_root_file() {
    // tokio-rustls: io::Error::new(InvalidData, rustls::Error). The io
    // error's `source()` skips the rustls error: it must still be found.
    let io = io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
    );
    assert!(io.source().is_none());
    let cx = TlsContext {
        mode: "verify-full",
        root_file: Some(PathBuf::from("/etc/db/wrong.crt")),
    };
    let why = tls_failure(&handshake(io), &cx).expect("a TLS failure");
    assert!(why.contains("not signed by a CA"), "{why}");
    assert!(why.contains("sslrootcert /etc/db/wrong.crt"), "{why}");
    assert!(!why.contains("UnknownIssuer"), "{why}");
}

#[test]
fn a_rustls_error_directly_in_the_chain_is_a_tls_failure() {
    let e = handshake(rustls::Error::InvalidCertificate(CertificateError::Revoked));
    let why = words_for(&e).expect("a TLS failure");
    assert!(why.contains("revoked"), "{why}");
}

#[test]
fn a_reset_or_end_of_the_connection_during_the_handshake_is_not_a_tls_failure() {
    // A server restarting or failing over: worth retrying.
    for kind in [
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::UnexpectedEof,
        io::ErrorKind::BrokenPipe,
    ] {
        let e = handshake(io::Error::new(kind, "tls handshake eof"));
        assert_eq!(words_for(&e), None, "{kind:?}");
    }
    let plain = Driver {
        text: "error connecting to server",
        cause: Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)),
    };
    assert_eq!(words_for(&plain), None);
}

#[test]
fn a_server_without_tls_is_a_tls_failure_naming_the_mode() {
    let e = Driver {
        text: "error performing TLS handshake",
        cause: "server does not support TLS".into(),
    };
    let why = words_for(&e).expect("a TLS failure");
    assert!(why.contains("does not offer TLS"), "{why}");
    assert!(why.contains("sslmode=verify-full"), "{why}");
    // The same text elsewhere in the chain does not count.
    let other = Driver {
        text: "error connecting to server",
        cause: "server does not support TLS".into(),
    };
    assert_eq!(words_for(&other), None);
}

#[test]
fn a_name_mismatch_says_which_host_and_which_names_without_debug_names() {
    let e = handshake(io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("127.0.0.1".to_owned()).unwrap(),
            presented: vec![
                "DNS name db.wrong.example".to_owned(),
                "common name db.wrong.example".to_owned(),
            ],
        }),
    ));
    let why = words_for(&e).expect("a TLS failure");
    assert!(why.contains("\"127.0.0.1\""), "{why}");
    assert!(
        why.contains("DNS name db.wrong.example, common name db.wrong.example"),
        "{why}"
    );
    assert!(
        !why.contains("IpAddress") && !why.contains("DnsName("),
        "{why}"
    );
}

#[test]
fn a_peer_that_does_not_speak_tls_is_left_to_the_not_postgres_check() {
    let e = handshake(io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
    ));
    assert_eq!(words_for(&e), None);
}

#[test]
fn alerts_from_the_server_are_told_in_words() {
    let alert = |a| words_for(&handshake(rustls::Error::AlertReceived(a))).unwrap();
    let version = alert(AlertDescription::ProtocolVersion);
    assert!(version.contains("ssl_min_protocol_version"), "{version}");
    let unknown_ca = alert(AlertDescription::UnknownCA);
    assert!(
        unknown_ca.contains("client certificate (sslcert): unknown CA"),
        "{unknown_ca}"
    );
    let required = alert(AlertDescription::CertificateRequired);
    assert!(
        required.contains("requires a client certificate"),
        "{required}"
    );
}

#[test]
fn variant_names_become_words() {
    assert_eq!(words("UnknownCA"), "unknown CA");
    assert_eq!(words("CertificateRequired"), "certificate required");
    assert_eq!(words("BadSignature"), "bad signature");
}

#[test]
fn a_version_1_certificate_is_refused_with_what_to_do_and_no_debug_dump() {
    let v1 = |host: &str, intermediate: bool, ip: bool| {
        handshake(rustls::Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(std::sync::Arc::new(super::Version1 {
                host: host.to_owned(),
                intermediate,
                ip,
            })),
        )))
    };
    let cx = TlsContext {
        mode: "verify-full",
        root_file: Some(PathBuf::from("/etc/db/root.crt")),
    };
    let why = tls_failure(&v1("db.example.com", false, false), &cx).unwrap();
    for part in [
        "it is an X.509 version 1 certificate, which this client cannot verify",
        "sslmode=verify-full checks it against sslrootcert /etc/db/root.crt",
        "reissue it as version 3",
        "subjectAltName=DNS:db.example.com",
        "sslmode=require and no root file",
    ] {
        assert!(why.contains(part), "{part:?} missing: {why}");
    }
    assert!(
        !why.contains("Other(") && !why.contains("Version1"),
        "{why}"
    );
    let why = tls_failure(&v1("10.0.0.5", false, true), &cx).unwrap();
    assert!(why.contains("subjectAltName=IP:10.0.0.5"), "{why}");
    // `require` checks the chain only because of the root file: said so.
    let require = TlsContext {
        mode: "require",
        root_file: Some(PathBuf::from("/home/u/.postgresql/root.crt")),
    };
    let why = tls_failure(&v1("db", true, false), &require).unwrap();
    assert!(
        why.contains("a CA certificate of its chain")
            && why
                .contains("because there is a root file, sslrootcert /home/u/.postgresql/root.crt")
            && why.contains("CA:TRUE"),
        "{why}"
    );
}

/// Refused over TLS, the words name both causes the driver cannot tell
/// apart: a login without SCRAM, and SCRAM offered without channel binding
/// (a pooler such as PgBouncer, which does not offer SCRAM-SHA-256-PLUS).
#[test]
fn channel_binding_refused_over_tls_names_a_pooler_without_scram_plus() {
    let over_tls = Attempt {
        tls_in_use: true,
        socket: false,
    };
    let text = unbound_login(&CX, &over_tls);
    assert!(
        text.starts_with("channel_binding=require refused the login"),
        "{text}"
    );
    assert!(text.contains("not scram-sha-256"), "{text}");
    assert!(text.contains("SCRAM-SHA-256-PLUS"), "{text}");
    assert!(text.contains("PgBouncer"), "{text}");
    let plain = Attempt {
        tls_in_use: false,
        socket: false,
    };
    let text = unbound_login(&CX, &plain);
    assert!(
        text.contains("TLS was not in use (sslmode=verify-full)"),
        "{text}"
    );
    assert!(!text.contains("PgBouncer"), "{text}");
}
