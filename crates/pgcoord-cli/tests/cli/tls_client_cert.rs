//! Client certificates from the command line: a private cluster whose role
//! `app` may only log in with a certificate (`cert` in `pg_hba.conf`), and
//! libpq's three ways to name it: `sslcert`/`sslkey` in the URL,
//! `PGSSLCERT`/`PGSSLKEY`, and `~/.postgresql/postgresql.crt` and `.key`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rcgen::{CertificateParams, DnType, KeyPair};

use crate::common::*;

fn signed(
    cn: &str,
    alt: Vec<String>,
    ca: &rcgen::Certificate,
    ca_key: &KeyPair,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(alt).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write(path: &Path, contents: &str, mode: u32) {
    std::fs::write(path, contents).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn a_role_that_logs_in_by_certificate_is_reached_the_three_ways_libpq_offers() {
    let (ca, ca_key) = crate::tls::ca("client cert test CA");
    let (server_pem, server_key) = signed("localhost", vec!["localhost".into()], &ca, &ca_key);
    let (app_pem, app_key) = signed("app", vec![], &ca, &ca_key);

    let (cluster, db) = crate::tls::cluster_and_db(true).await;
    let (c, ca_pem) = (cluster.clone(), ca.pem());
    tokio::task::spawn_blocking(move || {
        c.enable_tls_with_client_ca(&server_pem, &server_key, &ca_pem)?;
        c.set_hba(
            "local all all trust\n\
             hostssl all app 127.0.0.1/32 cert\n\
             host all app 127.0.0.1/32 reject\n\
             host all all 127.0.0.1/32 trust\n",
        )
    })
    .await
    .unwrap()
    .unwrap();

    let home = std::env::temp_dir().join(format!("pgcoord-cli-client-cert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let files = home.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let empty_home = home.join("empty");
    std::fs::create_dir_all(&empty_home).unwrap();
    let (root, cert, key) = (
        files.join("root.crt"),
        files.join("app.crt"),
        files.join("app.key"),
    );
    write(&root, &ca.pem(), 0o644);
    write(&cert, &app_pem, 0o644);
    write(&key, &app_key, 0o600);
    let base = format!(
        "postgres://app@localhost:{}/{}?sslmode=verify-full&sslrootcert={}",
        cluster.port(),
        db.name(),
        root.display()
    );
    let run = |url: String, home: &Path| {
        let mut c = eventsource(None);
        c.args(["lock", "run", "cert-key", "--", "true"])
            .env("DATABASE_URL", url)
            .env("HOME", home);
        c
    };

    // 1. In the URL.
    let url = format!("{base}&sslcert={}&sslkey={}", cert.display(), key.display());
    let out = output(&mut run(url.clone(), &empty_home)).await;
    assert_eq!(out.code, 0, "sslcert in the URL: {out:?}");
    // The tool's own inspection sessions present it too.
    let out = output(
        eventsource(None)
            .args(["lock", "holders"])
            .env("DATABASE_URL", &url)
            .env("HOME", &empty_home),
    )
    .await;
    assert_eq!(out.code, 0, "lock holders, sslcert in the URL: {out:?}");
    // The key in DER, which libpq also reads.
    let der = files.join("app.key.der");
    std::fs::write(&der, KeyPair::from_pem(&app_key).unwrap().serialize_der()).unwrap();
    std::fs::set_permissions(&der, std::fs::Permissions::from_mode(0o600)).unwrap();
    let der_url = format!("{base}&sslcert={}&sslkey={}", cert.display(), der.display());
    let out = output(&mut run(der_url, &empty_home)).await;
    assert_eq!(out.code, 0, "a DER key: {out:?}");
    // Without a certificate the server refuses the role.
    let out = output(&mut run(base.clone(), &empty_home)).await;
    assert_eq!(out.code, 69, "no certificate: {out:?}");
    assert!(out.stderr.contains("certificate"), "{out:?}");
    // 2. From libpq's environment.
    let mut c = run(base.clone(), &empty_home);
    c.env("PGSSLCERT", &cert).env("PGSSLKEY", &key);
    let out = output(&mut c).await;
    assert_eq!(out.code, 0, "PGSSLCERT: {out:?}");
    // 3. libpq's default files under ~/.postgresql (the root too).
    let dot = home.join("user").join(".postgresql");
    std::fs::create_dir_all(&dot).unwrap();
    write(&dot.join("root.crt"), &ca.pem(), 0o644);
    write(&dot.join("postgresql.crt"), &app_pem, 0o644);
    write(&dot.join("postgresql.key"), &app_key, 0o600);
    let plain = format!(
        "postgres://app@localhost:{}/{}?sslmode=verify-full",
        cluster.port(),
        db.name()
    );
    let out = output(&mut run(plain.clone(), &home.join("user"))).await;
    assert_eq!(out.code, 0, "~/.postgresql: {out:?}");
    // A key others may read is refused before connecting, as libpq does.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = output(&mut run(url, &empty_home)).await;
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("group or world access"), "{out:?}");
    let _ = std::fs::remove_dir_all(&home);
}

/// A version 1 client certificate (what `openssl x509 -req` without
/// `-extfile` makes; libpq presents it) logs in by certificate, the
/// server's own certificate being version 3 and fully checked; a key that
/// is not the certificate's is refused before connecting, in words.
#[tokio::test]
async fn a_version_1_client_certificate_logs_in_by_certificate() {
    use crate::tls_v1::{fixture, fixtures, private_key};
    let (ca, ca_key) = crate::tls::ca("server CA");
    let (server_pem, server_key) = signed("localhost", vec!["localhost".into()], &ca, &ca_key);
    let (cluster, db) = crate::tls::cluster_and_db(true).await;
    let c = cluster.clone();
    let client_ca = fixture("ca.crt");
    tokio::task::spawn_blocking(move || {
        c.enable_tls_with_client_ca(&server_pem, &server_key, &client_ca)?;
        c.set_hba(
            "local all all trust\n\
             hostssl all app 127.0.0.1/32 cert\n\
             host all all 127.0.0.1/32 reject\n",
        )
    })
    .await
    .unwrap()
    .unwrap();
    let scratch = scratch_dir();
    let root = scratch.join("root.crt");
    write(&root, &ca.pem(), 0o644);
    let url = |key: &Path| {
        format!(
            "postgres://app@localhost:{}/{}?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
            cluster.port(),
            db.name(),
            root.display(),
            fixtures().join("client-v1.crt").display(),
            key.display()
        )
    };
    let run = |url: String| {
        let mut c = eventsource(None);
        c.args(["lock", "run", "v1-client", "--", "true"])
            .env("DATABASE_URL", url);
        c
    };
    let out = output(&mut run(url(&private_key("client-v1.key", &scratch)))).await;
    assert_eq!(out.code, 0, "{out:?}");
    let out = output(&mut run(url(&private_key("server-v1.key", &scratch)))).await;
    assert_eq!(out.code, 69, "{out:?}");
    assert!(
        out.stderr
            .contains("is not the private key of the certificate in sslcert"),
        "{out:?}"
    );
    assert!(
        !out.stderr.contains("peer certificate") && !out.stderr.contains("Other("),
        "{out:?}"
    );
}
