use super::*;

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertificateRevocationListParams, DnType,
    IsCa, KeyIdMethod, KeyPair, RevokedCertParams, SerialNumber,
};

/// A fresh directory of this test's own.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pgcoord-crl-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A CA certificate (PEM) and a list of it revoking serial 7.
fn ca_and_crl() -> (String, rcgen::CertificateRevocationList) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "crl test CA");
    let ca = params.self_signed(&key).unwrap();
    let crl = CertificateRevocationListParams {
        this_update: date_time_ymd(2024, 1, 1),
        next_update: date_time_ymd(2124, 1, 1),
        crl_number: SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: vec![RevokedCertParams {
            serial_number: SerialNumber::from(7u64),
            revocation_time: date_time_ymd(2024, 1, 1),
            reason_code: None,
            invalidity_date: None,
        }],
        key_identifier_method: KeyIdMethod::Sha256,
    }
    .signed_by(&ca, &key)
    .unwrap();
    (ca.pem(), crl)
}

fn message(r: Result<Vec<CertificateRevocationListDer<'static>>, BackendError>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.kind(), BackendErrorKind::Tls);
    e.message().to_owned()
}

#[test]
fn a_list_is_read_from_pem_and_from_der() {
    let d = dir("forms");
    let (ca_pem, crl) = ca_and_crl();
    let (pem, der) = (d.join("root.crl"), d.join("root.crl.der"));
    // A PEM file may carry certificates beside its list, as OpenSSL's do.
    std::fs::write(&pem, format!("{ca_pem}{}", crl.pem().unwrap())).unwrap();
    std::fs::write(&der, crl.der().as_ref()).unwrap();
    for file in [&pem, &der] {
        let got = load_crls(Some(file), None).unwrap();
        assert_eq!(got.len(), 1, "{}", file.display());
        assert_eq!(got[0].as_ref(), crl.der().as_ref());
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_named_list_that_cannot_be_used_is_an_error_naming_it() {
    let d = dir("bad");
    let (ca_pem, _) = ca_and_crl();
    let missing = d.join("missing.crl");
    assert!(message(load_crls(Some(&missing), None)).contains("cannot read sslcrl"));
    let certificate_only = d.join("ca.pem");
    std::fs::write(&certificate_only, &ca_pem).unwrap();
    let m = message(load_crls(Some(&certificate_only), None));
    assert!(
        m.contains("no certificate revocation list in sslcrl"),
        "{m}"
    );
    assert!(m.contains("ca.pem"), "{m}");
    let garbage = d.join("garbage.crl");
    std::fs::write(&garbage, b"not a list at all").unwrap();
    let m = message(load_crls(Some(&garbage), None));
    assert!(m.contains("bad revocation list in"), "{m}");
    let missing_dir = d.join("nowhere");
    assert!(message(load_crls(None, Some(&missing_dir))).contains("cannot read sslcrldir"));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_directory_gives_the_lists_of_its_files_and_skips_certificates() {
    let d = dir("dir");
    let (ca_pem, crl) = ca_and_crl();
    std::fs::write(d.join("3a4b5c6d.0"), &ca_pem).unwrap();
    let m = message(load_crls(None, Some(&d)));
    assert!(
        m.contains("no certificate revocation list in sslcrldir"),
        "{m}"
    );
    std::fs::write(d.join("3a4b5c6d.r0"), crl.pem().unwrap()).unwrap();
    let got = load_crls(None, Some(&d)).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref(), crl.der().as_ref());
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn the_system_store_is_refused_by_name() {
    let e = load_roots(Some(Path::new("system"))).unwrap_err();
    assert!(e.message().contains("sslrootcert=system"), "{e}");
    assert!(refuse_system_store(Some(Path::new("system"))).is_err());
    assert!(refuse_system_store(Some(Path::new("/etc/ca.pem"))).is_ok());
    assert!(!root_file_present(Some(Path::new("/nonexistent/ca.pem"))));
}
