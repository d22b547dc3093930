//! A private cluster with TLS and certificates made for the test, shared by
//! the lock (`tls_postgres.rs`) and read-model (`readmodels_tls.rs`) TLS
//! tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use pgcoord_testkit::pg::{TestCluster, TestDatabase};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertificateRevocationListParams, DnType,
    IsCa, KeyIdMethod, KeyPair, RevokedCertParams, SerialNumber,
};

use crate::fault_support::private_cluster;

pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// The serial number of the server's certificate.
pub const SERVER_SERIAL: u64 = 4242;

impl Ca {
    /// A certificate revocation list of this CA (PEM) revoking `serials`.
    pub fn crl(&self, serials: &[u64]) -> String {
        CertificateRevocationListParams {
            this_update: date_time_ymd(2024, 1, 1),
            next_update: date_time_ymd(2124, 1, 1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|&s| RevokedCertParams {
                    serial_number: SerialNumber::from(s),
                    revocation_time: date_time_ymd(2024, 1, 1),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        }
        .signed_by(&self.cert, &self.key)
        .unwrap()
        .pem()
        .unwrap()
    }
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    Ca {
        cert: params.self_signed(&key).unwrap(),
        key,
    }
}

pub struct Setup {
    pub cluster: Arc<TestCluster>,
    pub db: TestDatabase,
    pub dir: PathBuf,
    pub ca_file: PathBuf,
    pub wrong_ca_file: PathBuf,
    /// The CA that signed the server's certificate (serial [`SERVER_SERIAL`]).
    pub root: Ca,
}

impl Setup {
    /// A URL for role `app`, which may only connect over TLS.
    pub fn url(&self, host: &str, port: u16, params: &str) -> String {
        format!("postgres://app@{host}:{port}/{}?{params}", self.db.name())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A private cluster serving the certificate `cert_pem` (key `key_pem`),
/// and a database on it; role `app` must use TLS, and so must
/// `scram_app`, which logs in with password `scram-secret` (SCRAM).
pub async fn cluster_serving(
    cert_pem: String,
    key_pem: String,
) -> (Arc<TestCluster>, TestDatabase) {
    let cluster = private_cluster(&[]).await;
    let db = TestDatabase::create_on(cluster.clone()).await.unwrap();
    db.connect()
        .await
        .unwrap()
        .batch_execute(
            "CREATE ROLE app LOGIN; \
             CREATE ROLE scram_app LOGIN PASSWORD 'scram-secret'",
        )
        .await
        .unwrap();
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || {
        c.enable_tls(&cert_pem, &key_pem)?;
        c.set_hba(
            "local all all trust\n\
             hostssl all app 127.0.0.1/32 trust\n\
             hostssl all scram_app 127.0.0.1/32 scram-sha-256\n\
             hostnossl all app 127.0.0.1/32 reject\n\
             host all all 127.0.0.1/32 trust\n",
        )
    })
    .await
    .unwrap()
    .unwrap();
    (cluster, db)
}

/// A cluster serving a certificate for `localhost` only (not for
/// 127.0.0.1), signed by a test CA; role `app` must use TLS, and so must
/// `scram_app`, which logs in with password `scram-secret` (SCRAM).
pub async fn setup() -> Setup {
    let root = ca("eventsource test CA");
    let wrong = ca("some other CA");
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.serial_number = Some(SerialNumber::from(SERVER_SERIAL));
    let server = params.signed_by(&key, &root.cert, &root.key).unwrap();
    let (cluster, db) = cluster_serving(server.pem(), key.serialize_pem()).await;

    let dir = std::env::temp_dir().join(format!("eventsource-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("root.crt");
    let wrong_ca_file = dir.join("wrong.crt");
    std::fs::write(&ca_file, root.cert.pem()).unwrap();
    std::fs::write(&wrong_ca_file, wrong.cert.pem()).unwrap();
    Setup {
        cluster,
        db,
        dir,
        ca_file,
        wrong_ca_file,
        root,
    }
}
