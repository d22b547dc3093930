//! TLS from the command line: `sslmode=verify-full` and `sslrootcert` in the
//! URL, on a private cluster whose role `app` may only connect over TLS.

use std::sync::Arc;

use pgcoord_testkit::pg::{StopMode, TestCluster, TestDatabase};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertificateRevocationListParams, DnType,
    IsCa, KeyIdMethod, KeyPair, RevokedCertParams, SerialNumber,
};

use crate::common::*;

/// A CA certificate named `name`, and its key.
pub(crate) fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

/// A private cluster and a database on it; with `app_role`, also a login
/// role `app` (for `pg_hba.conf` lines that treat it apart).
pub(crate) async fn cluster_and_db(app_role: bool) -> (Arc<TestCluster>, TestDatabase) {
    let (cluster, db) = crate::common::private_db(&[]).await;
    if app_role {
        db.connect()
            .await
            .unwrap()
            .batch_execute("CREATE ROLE app LOGIN")
            .await
            .unwrap();
    }
    (cluster, db)
}

/// A private cluster serving a certificate for `localhost` (serial 77)
/// signed by a test CA, where role `app` may connect over TLS only; the
/// CA's certificate and another CA's, written to `dir` as `good` and `bad`.
pub(crate) struct TlsServer {
    pub(crate) cluster: Arc<TestCluster>,
    pub(crate) db: TestDatabase,
    pub(crate) dir: std::path::PathBuf,
    pub(crate) good: std::path::PathBuf,
    pub(crate) bad: std::path::PathBuf,
    pub(crate) root: rcgen::Certificate,
    pub(crate) root_key: KeyPair,
}

/// [`TlsServer`], its files in a directory named after `tag`.
pub(crate) async fn tls_server(tag: &str) -> TlsServer {
    let (root, root_key) = ca("cli test CA");
    let (wrong, _) = ca("other CA");
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.serial_number = Some(SerialNumber::from(77u64));
    let server = params.signed_by(&key, &root, &root_key).unwrap();
    let (cluster, db) = cluster_and_db(true).await;
    let (cert_pem, key_pem) = (server.pem(), key.serialize_pem());
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.enable_tls(&cert_pem, &key_pem)?;
        c.set_hba(
            "local all all trust\n\
             hostssl all app 127.0.0.1/32 trust\n\
             hostnossl all app 127.0.0.1/32 reject\n\
             host all all 127.0.0.1/32 trust\n",
        )
    })
    .await
    .unwrap()
    .unwrap();
    let dir = std::env::temp_dir().join(format!("pgcoord-cli-tls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (good, bad) = (dir.join("root.crt"), dir.join("wrong.crt"));
    std::fs::write(&good, root.pem()).unwrap();
    std::fs::write(&bad, wrong.pem()).unwrap();
    TlsServer {
        cluster,
        db,
        dir,
        good,
        bad,
        root,
        root_key,
    }
}

#[tokio::test]
async fn verify_full_urls_work_and_a_wrong_ca_is_refused() {
    let TlsServer {
        cluster,
        db,
        dir,
        good,
        bad,
        root,
        root_key,
    } = tls_server("verify").await;
    let url = |ca: &std::path::Path| {
        format!(
            "postgres://app@localhost:{}/{}?sslmode=verify-full&sslrootcert={}",
            cluster.port(),
            db.name(),
            ca.display()
        )
    };

    for args in [
        vec!["lock", "run", "tls-key", "--", "true"],
        vec!["lock", "holders"],
        vec!["lock", "doctor"],
    ] {
        let out = output(
            eventsource(None)
                .args(&args)
                .env("DATABASE_URL", url(&good)),
        )
        .await;
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
    }
    for args in [
        vec!["lock", "run", "tls-key", "--", "true"],
        vec!["lock", "holders"],
    ] {
        let out = output(eventsource(None).args(&args).env("DATABASE_URL", url(&bad))).await;
        assert_eq!(out.code, 69, "{args:?}: {out:?}");
        assert!(out.stderr.contains("certificate"), "{args:?}: {out:?}");
    }
    // The same from libpq's environment alone: PGSSLMODE, PGSSLROOTCERT.
    let port = cluster.port().to_string();
    for (ca, code) in [(&good, 0), (&bad, 69)] {
        let out = output(
            eventsource(None)
                .args(["lock", "holders"])
                .env("PGHOST", "localhost")
                .env("PGPORT", &port)
                .env("PGUSER", "app")
                .env("PGDATABASE", db.name())
                .env("PGSSLMODE", "verify-full")
                .env("PGSSLROOTCERT", ca),
        )
        .await;
        assert_eq!(out.code, code, "PGSSLROOTCERT={}: {out:?}", ca.display());
    }
    // PGSSLCRL: a revocation list of the CA naming the server's certificate.
    let crl = dir.join("root.crl");
    let list = CertificateRevocationListParams {
        this_update: date_time_ymd(2024, 1, 1),
        next_update: date_time_ymd(2124, 1, 1),
        crl_number: SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: vec![RevokedCertParams {
            serial_number: SerialNumber::from(77u64),
            revocation_time: date_time_ymd(2024, 1, 1),
            reason_code: None,
            invalidity_date: None,
        }],
        key_identifier_method: KeyIdMethod::Sha256,
    }
    .signed_by(&root, &root_key)
    .unwrap();
    std::fs::write(&crl, list.pem().unwrap()).unwrap();
    let out = output(
        eventsource(None)
            .args(["lock", "holders"])
            .env("DATABASE_URL", url(&good))
            .env("PGSSLCRL", &crl),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(out.stderr.to_lowercase().contains("revoked"), "{out:?}");
    // Without TLS the role is refused: the URL's sslmode is really applied,
    // over PGSSLMODE.
    let plain = format!(
        "postgres://app@localhost:{}/{}?sslmode=disable",
        cluster.port(),
        db.name()
    );
    let out = output(
        eventsource(None)
            .args(["lock", "holders"])
            .env("PGSSLMODE", "verify-full")
            .env("PGSSLROOTCERT", &good)
            .env("DATABASE_URL", plain),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The certificate PostgreSQL's documentation tells a user to make for a
/// first TLS setup (`openssl req -new -x509 -subj "/CN=..."`: self-signed,
/// marked a CA, a common name and no alternative name), copied to the
/// client as its root: libpq accepts it, and so must we.
#[tokio::test]
async fn the_documentations_self_signed_certificate_is_accepted_as_libpq_does() {
    let (server, key) = ca("localhost");
    let (cluster, db) = cluster_and_db(false).await;
    let (cert_pem, key_pem) = (server.pem(), key.serialize_pem());
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.enable_tls(&cert_pem, &key_pem))
        .await
        .unwrap()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("pgcoord-cli-tls-self-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = dir.join("root.crt");
    std::fs::write(&root, server.pem()).unwrap();
    let url = |host: &str, mode: &str| {
        format!(
            "postgres://postgres@{host}:{}/{}?sslmode={mode}&sslrootcert={}",
            cluster.port(),
            db.name(),
            root.display()
        )
    };
    for (host, mode, code) in [
        ("localhost", "verify-full", 0),
        // libpq's other TLS options, as a libpq without GSSAPI takes them.
        (
            "localhost",
            "verify-full&ssl_min_protocol_version=TLSv1.3&sslsni=0&gssencmode=prefer&sslcompression=0",
            0,
        ),
        ("localhost", "verify-full&ssl_max_protocol_version=TLSv1.2", 0),
        ("localhost", "verify-ca", 0),
        // The name is still checked: the certificate names localhost only.
        ("127.0.0.1", "verify-full", 69),
        ("127.0.0.1", "verify-ca", 0),
    ] {
        let out = output(
            eventsource(None)
                .args(["lock", "run", "tls-self-signed", "--", "true"])
                .env("DATABASE_URL", url(host, mode)),
        )
        .await;
        assert_eq!(out.code, code, "{host} {mode}: {out:?}");
        if code != 0 {
            assert!(out.stderr.contains("certificate"), "{host} {mode}: {out:?}");
        }
    }
    // The version range is really applied: a server capped at TLS 1.2
    // refuses a client that asks for 1.3 at least, and takes one capped
    // at 1.2 itself.
    db.connect()
        .await
        .unwrap()
        .batch_execute("ALTER SYSTEM SET ssl_max_protocol_version = 'TLSv1.2'")
        .await
        .unwrap();
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.restart(StopMode::Fast))
        .await
        .unwrap()
        .unwrap();
    for (options, code) in [
        ("&ssl_min_protocol_version=TLSv1.3", 69),
        ("&ssl_max_protocol_version=TLSv1.2", 0),
    ] {
        let out = output(
            eventsource(None)
                .args(["lock", "run", "tls-self-signed", "--", "true"])
                .env("DATABASE_URL", url("localhost", "verify-full") + options),
        )
        .await;
        assert_eq!(out.code, code, "{options}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS failure is final, not a server to wait for: `lock run --timeout`
/// exits 69 at once (no "retrying until --timeout" line), in words without
/// rustls's names and with a hint about the TLS settings, not the URL. A
/// login refused by a pg_hba.conf line gets a pg_hba hint, not the
/// password one.
#[tokio::test]
async fn tls_failures_end_a_run_at_once_with_a_hint_about_the_tls_settings() {
    let TlsServer {
        cluster,
        db,
        dir,
        good,
        bad,
        ..
    } = tls_server("final").await;
    let missing = dir.join("missing.crt");
    let port = cluster.port().to_string();
    let run = ["lock", "run", "--timeout", "30s", "tls-final", "--", "true"];
    let final_tls_failure = |out: &Output, what: &str| {
        assert_eq!(out.code, 69, "{what}: {out:?}");
        let err = &out.stderr;
        assert!(!err.contains("retrying until --timeout"), "{what}: {err}");
        assert!(
            !err.contains("UnknownIssuer") && !err.contains("DnsName("),
            "{what}: {err}"
        );
        assert!(!err.contains("database URL"), "{what}: {err}");
        assert!(
            err.contains("sslrootcert") && err.contains("sslmode"),
            "{what}: {err}"
        );
    };

    // From a URL: a wrong CA, a missing root file.
    let url = |ca: &std::path::Path| {
        format!(
            "postgres://app@localhost:{port}/{}?sslmode=verify-full&sslrootcert={}",
            db.name(),
            ca.display()
        )
    };
    let out = output(eventsource(None).args(run).env("DATABASE_URL", url(&bad))).await;
    final_tls_failure(&out, "wrong CA");
    assert!(out.stderr.contains("not signed by a CA"), "{out:?}");
    let out = output(
        eventsource(None)
            .args(run)
            .env("DATABASE_URL", url(&missing)),
    )
    .await;
    final_tls_failure(&out, "missing sslrootcert");
    assert!(out.stderr.contains("missing.crt"), "{out:?}");

    // From libpq's environment alone: a certificate for another host name.
    let env = |cmd: &mut tokio::process::Command, host: &str, mode: &str| {
        cmd.env("PGHOST", host)
            .env("PGPORT", &port)
            .env("PGUSER", "app")
            .env("PGDATABASE", db.name())
            .env("PGSSLMODE", mode)
            .env("PGSSLROOTCERT", &good);
    };
    let mut cmd = eventsource(None);
    env(cmd.args(run), "127.0.0.1", "verify-full");
    let out = output(&mut cmd).await;
    final_tls_failure(&out, "wrong host name");
    assert!(out.stderr.contains("DNS name localhost"), "{out:?}");

    // Without TLS, pg_hba.conf rejects the role (SQLSTATE 28000): its own
    // hint, not the password's, and still no retries.
    let mut cmd = eventsource(None);
    env(cmd.args(run), "127.0.0.1", "disable");
    let out = output(&mut cmd).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(out.stderr.contains("28000"), "{out:?}");
    assert!(out.stderr.contains("pg_hba.conf does not let"), "{out:?}");
    assert!(!out.stderr.contains("the password"), "{out:?}");
    assert!(!out.stderr.contains("retrying until --timeout"), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sslmode=require` against a server that offers no TLS: final, in words.
#[tokio::test]
async fn require_against_a_server_without_tls_ends_a_run_at_once() {
    let (cluster, db) = cluster_and_db(false).await;
    let url = format!(
        "postgres://postgres@localhost:{}/{}?sslmode=require",
        cluster.port(),
        db.name()
    );
    let out = output(
        eventsource(None)
            .args(["lock", "run", "--timeout", "30s", "no-tls", "--", "true"])
            .env("DATABASE_URL", url),
    )
    .await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(out.stderr.contains("does not offer TLS"), "{out:?}");
    assert!(out.stderr.contains("sslmode=require"), "{out:?}");
    assert!(!out.stderr.contains("retrying until --timeout"), "{out:?}");
    assert!(!out.stderr.contains("database URL"), "{out:?}");
}
