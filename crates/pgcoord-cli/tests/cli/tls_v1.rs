//! X.509 version 1 certificates from the command line: the fixtures of
//! `crates/pgcoord/tests/fixtures/tls-v1`, which `openssl x509 -req`
//! without `-extfile` made, as PostgreSQL's documentation signs
//! certificates. A server's is taken where libpq checks no certificate
//! (`sslmode=require` without a root file) and refused by `verify-full`
//! with what to do; a client's is presented for a `cert` login, as libpq
//! presents it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::*;

/// The fixtures' directory.
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pgcoord/tests/fixtures/tls-v1")
}

pub(crate) fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).unwrap()
}

/// The fixture key `name` copied to `dir` with mode 0600 (git keeps no
/// mode, and a key others may read is refused, as libpq refuses it).
pub(crate) fn private_key(name: &str, dir: &Scratch) -> PathBuf {
    let key = dir.join(name);
    std::fs::write(&key, fixture(name)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    key
}

#[tokio::test]
async fn a_version_1_server_certificate_is_used_as_libpq_uses_it() {
    let (cluster, db) = crate::tls::cluster_and_db(true).await;
    let (cert, key, ca) = (
        fixture("server-v1.crt"),
        fixture("server-v1.key"),
        fixture("ca.crt"),
    );
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.enable_tls_with_client_ca(&cert, &key, &ca)?;
        c.set_hba(
            "local all all trust\n\
             hostssl all app 127.0.0.1/32 cert\n\
             host all app 127.0.0.1/32 reject\n\
             hostssl all all 127.0.0.1/32 trust\n\
             host all all 127.0.0.1/32 reject\n",
        )
    })
    .await
    .unwrap()
    .unwrap();
    let url = |user: &str, params: &str| {
        format!(
            "postgres://{user}@localhost:{}/{}?{params}",
            cluster.port(),
            db.name()
        )
    };
    let run = |url: String| {
        let mut c = eventsource(None);
        c.args(["lock", "run", "v1-key", "--", "true"])
            .env("DATABASE_URL", url);
        c
    };

    // libpq's `require` checks no certificate: neither does this client.
    let out = output(&mut run(url("postgres", "sslmode=require"))).await;
    assert_eq!(out.code, 0, "require: {out:?}");
    // A version 1 client certificate too, with the same server.
    let scratch = scratch_dir();
    let client_key = private_key("client-v1.key", &scratch);
    let with_cert = format!(
        "sslmode=require&sslcert={}&sslkey={}",
        fixtures().join("client-v1.crt").display(),
        client_key.display()
    );
    let out = output(&mut run(url("app", &with_cert))).await;
    assert_eq!(out.code, 0, "a version 1 client certificate: {out:?}");

    // The verifying modes cannot check it: refused at once, saying why
    // and what to do, in words.
    let ca = fixtures().join("ca.crt");
    let verify = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let out = output(&mut run(url("postgres", &verify))).await;
    assert_eq!(out.code, 69, "verify-full: {out:?}");
    for part in [
        "the server's certificate was refused: it is an X.509 version 1 certificate",
        "reissue it as version 3",
        "subjectAltName=DNS:localhost",
        "sslmode=require and no root file",
        "trying again will not help",
    ] {
        assert!(out.stderr.contains(part), "{part:?} missing: {out:?}");
    }
    assert!(
        !out.stderr.contains("UnsupportedCertVersion") && !out.stderr.contains("Other("),
        "{out:?}"
    );
}
