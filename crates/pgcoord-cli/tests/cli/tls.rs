//! TLS from the command line: `sslmode=verify-full` and `sslrootcert` in the
//! URL, on a private cluster whose role `app` may only connect over TLS.

use std::sync::Arc;

use pgcoord_testkit::pg::{TestCluster, TestDatabase};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

use crate::common::*;

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

#[tokio::test]
async fn verify_full_urls_work_and_a_wrong_ca_is_refused() {
    let (root, root_key) = ca("cli test CA");
    let (wrong, _) = ca("other CA");
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &root, &root_key)
        .unwrap();
    let cluster = Arc::new(
        tokio::task::spawn_blocking(TestCluster::start)
            .await
            .unwrap()
            .unwrap(),
    );
    let db = TestDatabase::create_on(cluster.clone()).await.unwrap();
    db.connect()
        .await
        .unwrap()
        .batch_execute("CREATE ROLE app LOGIN")
        .await
        .unwrap();
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
    let dir = std::env::temp_dir().join(format!("pgcoord-cli-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (good, bad) = (dir.join("root.crt"), dir.join("wrong.crt"));
    std::fs::write(&good, root.pem()).unwrap();
    std::fs::write(&bad, wrong.pem()).unwrap();
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
