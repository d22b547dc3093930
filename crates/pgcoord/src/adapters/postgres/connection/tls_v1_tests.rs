//! Version 1 certificates made by the OpenSSL command line (see
//! `tests/fixtures/tls-v1/README.md`): what the verifier decides for them,
//! and that their public key is read. The handshakes themselves, TLS 1.2
//! and 1.3, are `tests/it/tls_v1.rs`'s.

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::CertificateError;

use super::*;
use crate::adapters::postgres::connection::tls_verifier::tests::{provider, verifier};
use crate::adapters::postgres::connection::tls_verifier::Verifier;

const CA: &str = include_str!("../../../../tests/fixtures/tls-v1/ca.crt");
const SERVER: &str = include_str!("../../../../tests/fixtures/tls-v1/server-v1.crt");
const SERVER_KEY: &str = include_str!("../../../../tests/fixtures/tls-v1/server-v1.key");
const SELF_SIGNED: &str =
    include_str!("../../../../tests/fixtures/tls-v1/server-v1-self-signed.crt");
const CLIENT: &str = include_str!("../../../../tests/fixtures/tls-v1/client-v1.crt");

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn check(v: &Verifier, cert: &CertificateDer<'_>, host: &str) -> Result<(), rustls::Error> {
    let name = ServerName::try_from(host.to_owned()).unwrap();
    v.verify_server_cert(cert, &[], &name, &[], UnixTime::now())
        .map(|_| ())
}

/// The [`Version1`] inside a refusal, if that is what it is.
fn version_1(e: &rustls::Error) -> Option<&Version1> {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(o)) => o.0.downcast_ref(),
        _ => None,
    }
}

#[test]
fn the_fixtures_are_what_their_names_say() {
    assert!(is_version_1(&der(SERVER)));
    assert!(is_version_1(&der(CLIENT)));
    assert!(is_self_signed_version_1(&der(SELF_SIGNED)));
    assert!(!is_self_signed_version_1(&der(SERVER)));
    assert!(!is_version_1(&der(CA)), "the CA is version 3");
    assert!(!is_version_1(b"not a certificate"));
}

#[test]
fn the_verifying_modes_refuse_a_version_1_server_certificate_by_name() {
    let v = verifier(&[der(CA)], true);
    let e = check(&v, &der(SERVER), "localhost").unwrap_err();
    let v1 = version_1(&e).unwrap_or_else(|| panic!("not the version 1 refusal: {e:?}"));
    assert_eq!(
        (v1.host.as_str(), v1.intermediate, v1.ip),
        ("localhost", false, false)
    );
    // An address is named as one, for the reissued certificate's IP name.
    let e = check(&verifier(&[der(CA)], false), &der(SERVER), "127.0.0.1").unwrap_err();
    let v1 = version_1(&e).unwrap();
    assert_eq!((v1.host.as_str(), v1.ip), ("127.0.0.1", true));
    // Listed in the root file but not self-signed: still not checkable.
    let e = check(&verifier(&[der(SERVER)], true), &der(SERVER), "localhost").unwrap_err();
    assert!(version_1(&e).is_some(), "{e:?}");
}

#[test]
fn a_self_signed_version_1_certificate_listed_as_the_root_is_trusted_as_itself() {
    let v = verifier(&[der(SELF_SIGNED)], true);
    check(&v, &der(SELF_SIGNED), "localhost").unwrap();
    // Its common name is still the name checked.
    let e = check(&v, &der(SELF_SIGNED), "db.example.com").unwrap_err();
    assert!(
        matches!(
            e,
            rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })
        ),
        "{e:?}"
    );
    // Not listed: not trusted.
    let e = check(&verifier(&[der(CA)], true), &der(SELF_SIGNED), "localhost").unwrap_err();
    assert!(version_1(&e).is_some(), "{e:?}");
}

#[test]
fn the_lax_modes_take_a_version_1_certificate_as_they_take_any() {
    let v = Verifier::lax(provider());
    check(&v, &der(SERVER), "localhost").unwrap();
}

#[test]
fn the_public_key_of_a_version_1_certificate_is_its_private_keys() {
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).unwrap();
    let signing = provider().key_provider.load_private_key(key).unwrap();
    let from_key = signing.public_key().unwrap();
    assert_eq!(public_key(&der(SERVER)).unwrap(), from_key);
    assert_eq!(public_key(&der(SELF_SIGNED)).unwrap(), from_key);
    assert_ne!(public_key(&der(CLIENT)).unwrap(), from_key);
    // webpki itself cannot read it: why this module exists.
    let e = rustls::server::ParsedCertificate::try_from(&der(SERVER))
        .err()
        .expect("webpki parsed a version 1 certificate");
    assert!(is_unsupported_version(&e), "{e:?}");
}
