use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::RootCertStore;

use super::{dns_matches, Verifier};

/// The ring provider the verifiers under test use (also `tls_v1_tests.rs`).
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A verifying [`Verifier`] trusting `roots` (also `tls_v1_tests.rs`).
pub(crate) fn verifier(roots: &[CertificateDer<'static>], check_name: bool) -> Verifier {
    let mut store = RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).unwrap();
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider())
        .build()
        .unwrap();
    Verifier::verifying(webpki, roots.to_vec(), check_name, provider())
}

/// What `openssl req -new -x509 -subj "/CN=<cn>"` makes, as PostgreSQL's
/// documentation shows it: self-signed, marked a CA, a common name and no
/// alternative name.
fn docs_recipe_cert(cn: &str) -> CertificateDer<'static> {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, cn);
    params.self_signed(&key).unwrap().der().clone()
}

fn check(v: &Verifier, cert: &CertificateDer<'_>, host: &str) -> Result<(), rustls::Error> {
    check_at(v, cert, host, UnixTime::now())
}

fn check_at(
    v: &Verifier,
    cert: &CertificateDer<'_>,
    host: &str,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let name = ServerName::try_from(host.to_owned()).unwrap();
    v.verify_server_cert(cert, &[], &name, &[], now).map(|_| ())
}

#[test]
fn wildcards_match_one_label_as_libpq_does() {
    assert!(dns_matches("db.example.com", "DB.Example.com"));
    assert!(dns_matches("*.example.com", "db.example.com"));
    assert!(!dns_matches("*.example.com", "example.com"));
    assert!(!dns_matches("*.example.com", "a.b.example.com"));
    assert!(!dns_matches("db*.example.com", "db1.example.com"));
    assert!(!dns_matches("db.example.com", "db.example.org"));
}

#[test]
fn a_self_signed_certificate_listed_as_the_root_is_trusted_as_itself() {
    let cert = docs_recipe_cert("localhost");
    let full = verifier(std::slice::from_ref(&cert), true);
    assert!(check(&full, &cert, "localhost").is_ok());
    // verify-full still checks the name (its common name here).
    assert!(check(&full, &cert, "db.example.com").is_err());
    assert!(check(&full, &cert, "127.0.0.1").is_err());
    // verify-ca checks the trust, not the name.
    let ca_only = verifier(std::slice::from_ref(&cert), false);
    assert!(check(&ca_only, &cert, "db.example.com").is_ok());
    // Another self-signed certificate with the same name is not trusted.
    let stranger = docs_recipe_cert("localhost");
    assert!(check(&full, &stranger, "localhost").is_err());
    assert!(check(&ca_only, &stranger, "localhost").is_err());
}

#[test]
fn a_self_signed_certificate_trusted_as_itself_must_be_in_its_validity_period() {
    let cert = docs_recipe_cert("localhost");
    let full = verifier(std::slice::from_ref(&cert), true);
    // rcgen's default validity ends in 4096; long before that it is valid.
    let far = UnixTime::since_unix_epoch(Duration::from_secs(100 * 365 * 86_400 + 2_000_000_000));
    assert!(check_at(&full, &cert, "localhost", far).is_ok());
    let past = UnixTime::since_unix_epoch(Duration::from_secs(1));
    assert!(check_at(&full, &cert, "localhost", past).is_err());
}

#[test]
fn the_common_name_counts_only_without_an_alternative_name_of_the_hosts_kind() {
    let (ca_key, ca) = {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "test CA");
        let cert = params.self_signed(&key).unwrap();
        (key, cert)
    };
    let leaf = |cn: &str, alt: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(alt).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.signed_by(&key, &ca, &ca_key).unwrap().der().clone()
    };
    let full = verifier(&[ca.der().clone()], true);
    let cn_only = leaf("*.db.internal", vec![]);
    assert!(check(&full, &cn_only, "pg1.db.internal").is_ok());
    assert!(check(&full, &cn_only, "other.internal").is_err());
    // A DNS alternative name rules the common name out for host names...
    let with_alt = leaf("pg1.db.internal", vec!["pg2.db.internal".to_owned()]);
    assert!(check(&full, &with_alt, "pg2.db.internal").is_ok());
    assert!(check(&full, &with_alt, "pg1.db.internal").is_err());
    // ...but not for an address, which only an IP alternative name rules out.
    let by_address = leaf("10.0.0.7", vec!["pg.db.internal".to_owned()]);
    assert!(check(&full, &by_address, "10.0.0.7").is_ok());
    let ip_alt = leaf("10.0.0.7", vec!["10.0.0.8".to_owned()]);
    assert!(check(&full, &ip_alt, "10.0.0.8").is_ok());
    assert!(check(&full, &ip_alt, "10.0.0.7").is_err());
}

#[test]
fn a_name_mismatch_lists_the_certificates_names_in_words() {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["db.wrong.example".to_owned(), "10.0.0.1".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "db.wrong.example");
    let leaf = params.signed_by(&key, &ca, &ca_key).unwrap().der().clone();
    let full = verifier(&[ca.der().clone()], true);
    match check(&full, &leaf, "127.0.0.1") {
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForNameContext { presented, .. },
        )) => assert_eq!(
            presented,
            [
                "DNS name db.wrong.example",
                "IP address 10.0.0.1",
                "common name db.wrong.example"
            ]
        ),
        other => panic!("{other:?}"),
    }
}
