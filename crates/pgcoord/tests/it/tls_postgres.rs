//! TLS on a private cluster with certificates made for the test:
//! `verify-full` connects (and cancels) over TLS; a wrong CA, a wrong host
//! name, a missing root file are TLS errors, `sslmode=disable` against a
//! TLS-only role a connect error; `verify-ca` and `require` check less.

use crate::common;
use crate::fault_support;
use crate::tls_support;

use std::time::Duration;

use fault_support::*;
use pgcoord::{error::BackendErrorKind, lock_id_for_key, DistributedLock, LockRegistry};
use pgcoord::{postgres::SslMode, PostgresLockManager};
use pgcoord_testkit::locks::{eventually, eventually_async};
use tls_support::setup;

const SECS: Duration = Duration::from_secs(30);

/// The message of a connect to `url` that fails with a `kind` error.
async fn connect_fails(url: &str, what: &str, kind: BackendErrorKind) -> String {
    let m = url
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let err = tokio::time::timeout(SECS, m.acquire("k", Some(Duration::from_secs(10))))
        .await
        .unwrap_or_else(|_| panic!("{what}: hung"))
        .unwrap_err();
    let backend = err
        .as_backend()
        .unwrap_or_else(|| panic!("{what}: {err:?}"));
    assert_eq!(backend.kind(), kind, "{what}: {err:?}");
    assert_eq!(m.held_lock_count(), 0);
    eventually("no session", SECS, || m.session_count() == 0).await;
    err.to_string()
}

async fn connects(url: &str, what: &str) {
    let m = url
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let g = m
        .acquire("k", Some(SECS))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    g.release().await.unwrap();
    m.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_locks_and_cancels_over_tls() {
    let s = setup().await;
    let proxy = Proxy::start(s.cluster.port()).await;
    let url = s.url(
        "localhost",
        proxy.port,
        &format!(
            "sslmode=verify-full&sslrootcert={}&application_name=ignored",
            s.ca_file.display()
        ),
    );
    let m = url
        .parse()
        .map(PostgresLockManager::builder)
        .unwrap()
        .holder_id("tls")
        .build()
        .unwrap();
    let guard = m.acquire("tls-held", Some(SECS)).await.unwrap();

    // A contended wait, dropped: its cancel must go over TLS too.
    let blocker = common::manager(&s.db, "blocker");
    let k = "tls-contended";
    let held = blocker.acquire(k, None).await.unwrap();
    let m2 = m.clone();
    let waiter = tokio::spawn(async move { m2.acquire(k, None).await });
    let client = s.db.connect().await.unwrap();
    common::wait_for_waiters(&client, lock_id_for_key(k), 1).await;
    let connections_before_cancel = proxy.openings.lock().unwrap().len();
    waiter.abort();
    eventually_async("the cancelled waiter left the queue", || async {
        common::lock_rows(&client, lock_id_for_key(k)).await.1 == 0
    })
    .await;
    eventually("the cancel request went through the proxy", SECS, || {
        proxy.openings.lock().unwrap().len() > connections_before_cancel
    })
    .await;

    // Every session of the manager runs TLS on the server's side...
    let rows = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'eventsource/tls'",
            &[],
        )
        .await
        .unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r.get::<_, bool>(0)),
        "a session without TLS"
    );
    // ...and every connection it opened, the cancel included, began with an
    // SSLRequest (a plain cancel would begin with the cancel code).
    let openings = proxy.openings.lock().unwrap().clone();
    assert!(openings.len() >= 3, "{openings:?}");
    for o in &openings {
        assert_eq!(
            o[4..8],
            SSL_REQUEST_CODE,
            "a connection opened without TLS: {o:?}"
        );
    }
    guard.release().await.unwrap();
    held.release().await.unwrap();
    m.close().await.unwrap();
}

/// SCRAM binds to the TLS session: `channel_binding=require` (which
/// tokio-postgres enforces: no `-PLUS`, no connection) logs in, as it does
/// with libpq; so does the default (`prefer`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_over_tls_binds_to_the_channel() {
    let s = setup().await;
    let port = s.cluster.port();
    let ca = s.ca_file.display().to_string();
    for (binding, what) in [("&channel_binding=require", "required"), ("", "default")] {
        let url = format!(
            "postgres://scram_app:scram-secret@localhost:{port}/{}?sslmode=verify-full\
             &sslrootcert={ca}{binding}",
            s.db.name()
        );
        connects(&url, what).await;
    }
    // Without TLS there is nothing to bind to: refused before any login.
    let plain = format!(
        "postgres://scram_app:scram-secret@localhost:{port}/{}?sslmode=disable\
         &channel_binding=require",
        s.db.name()
    );
    let m = plain
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let err = m.acquire("k", Some(SECS)).await.unwrap_err();
    assert!(err.as_backend().is_some(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_checks_fail_cleanly_and_lax_modes_check_less() {
    let s = setup().await;
    let port = s.cluster.port();
    let ca = s.ca_file.display().to_string();
    let wrong = s.wrong_ca_file.display().to_string();

    connects(
        &s.url(
            "localhost",
            port,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        "verify-full",
    )
    .await;

    let msg = connect_fails(
        &s.url(
            "localhost",
            port,
            &format!("sslmode=verify-full&sslrootcert={wrong}"),
        ),
        "wrong CA",
        BackendErrorKind::Tls,
    )
    .await;
    assert!(msg.contains("certificate"), "{msg}");
    let msg = connect_fails(
        &s.url(
            "localhost",
            port,
            &format!("sslmode=verify-ca&sslrootcert={wrong}"),
        ),
        "wrong CA, verify-ca",
        BackendErrorKind::Tls,
    )
    .await;
    assert!(msg.contains("certificate"), "{msg}");

    // The certificate names localhost, not 127.0.0.1.
    let msg = connect_fails(
        &s.url(
            "127.0.0.1",
            port,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        "wrong host name",
        BackendErrorKind::Tls,
    )
    .await;
    // Which host was asked for and which names the certificate carries, in
    // words (not rustls's `DnsName("...")`).
    assert!(
        msg.contains("certificate")
            && msg.contains("\"127.0.0.1\"")
            && msg.contains("DNS name localhost"),
        "{msg}"
    );
    assert!(!msg.contains("DnsName"), "{msg}");
    connects(
        &s.url(
            "127.0.0.1",
            port,
            &format!("sslmode=verify-ca&sslrootcert={ca}"),
        ),
        "verify-ca",
    )
    .await;

    // Modes that check no certificate still encrypt (the role needs TLS).
    connects(&s.url("127.0.0.1", port, "sslmode=require"), "require").await;
    // As libpq: `require` with a root file checks the chain (not the name).
    let msg = connect_fails(
        &s.url(
            "localhost",
            port,
            &format!("sslmode=require&sslrootcert={wrong}"),
        ),
        "require with the wrong CA's file",
        BackendErrorKind::Tls,
    )
    .await;
    assert!(msg.contains("certificate"), "{msg}");
    connects(
        &s.url(
            "127.0.0.1",
            port,
            &format!("sslmode=require&sslrootcert={ca}"),
        ),
        "require with the CA's file, by address",
    )
    .await;
    connects(&s.url("127.0.0.1", port, "sslmode=prefer"), "prefer").await;
    let msg = connect_fails(
        &s.url("127.0.0.1", port, "sslmode=disable"),
        "disable",
        BackendErrorKind::Connect,
    )
    .await;
    assert!(msg.contains("28000"), "{msg}");

    let missing = s.dir.join("missing.crt");
    let msg = connect_fails(
        &s.url(
            "localhost",
            port,
            &format!("sslmode=verify-full&sslrootcert={}", missing.display()),
        ),
        "missing root file",
        BackendErrorKind::Tls,
    )
    .await;
    assert!(msg.contains("missing.crt"), "{msg}");

    // The builder options do what the URL parameters do.
    let config: tokio_postgres::Config = format!("postgres://app@localhost:{port}/{}", s.db.name())
        .parse()
        .unwrap();
    let m = PostgresLockManager::builder(config.clone().into())
        .ssl_mode(SslMode::VerifyFull)
        .ssl_root_cert(&s.ca_file)
        .build()
        .unwrap();
    m.acquire("k", Some(SECS))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let m = PostgresLockManager::builder(config.into())
        .ssl_mode(SslMode::VerifyFull)
        .ssl_root_cert(&s.wrong_ca_file)
        .build()
        .unwrap();
    assert!(m.acquire("k", Some(SECS)).await.is_err());
}

/// libpq's revocation lists: a server certificate that `sslcrl` (or
/// `sslcrldir`, or `PGSSLCRL`) revokes is refused by the verifying modes; a
/// list of its CA that does not name it lets the session through; a list
/// that is asked for and cannot be read is an error naming it, not a
/// check silently dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_server_certificates_are_refused() {
    let s = setup().await;
    let port = s.cluster.port();
    let revoking = s.dir.join("revoking.crl");
    let other = s.dir.join("other.crl");
    std::fs::write(&revoking, s.root.crl(&[tls_support::SERVER_SERIAL, 9])).unwrap();
    std::fs::write(&other, s.root.crl(&[9])).unwrap();
    let crl_dir = s.dir.join("crls");
    std::fs::create_dir_all(&crl_dir).unwrap();
    std::fs::copy(&revoking, crl_dir.join("0a1b2c3d.r0")).unwrap();
    let verify = |mode: &str, extra: &str| {
        s.url(
            "localhost",
            port,
            &format!("sslmode={mode}&sslrootcert={}{extra}", s.ca_file.display()),
        )
    };

    for mode in ["verify-full", "verify-ca"] {
        let msg = connect_fails(
            &verify(mode, &format!("&sslcrl={}", revoking.display())),
            &format!("{mode}, revoked by sslcrl"),
            BackendErrorKind::Tls,
        )
        .await;
        assert!(msg.to_lowercase().contains("revoked"), "{msg}");
        connects(
            &verify(mode, &format!("&sslcrl={}", other.display())),
            &format!("{mode}, a list that does not name it"),
        )
        .await;
    }
    let msg = connect_fails(
        &verify("verify-full", &format!("&sslcrldir={}", crl_dir.display())),
        "revoked by sslcrldir",
        BackendErrorKind::Tls,
    )
    .await;
    assert!(msg.to_lowercase().contains("revoked"), "{msg}");

    // From the environment, as libpq reads PGSSLCRL.
    let env = pgcoord::postgres::LibpqEnv::from_vars([
        ("PGSSLCRL", revoking.to_str().unwrap()),
        ("HOME", s.dir.to_str().unwrap()),
    ]);
    let options = pgcoord::ConnectOptions::resolve(Some(&verify("verify-full", "")), &env).unwrap();
    let m = PostgresLockManager::builder(options).build().unwrap();
    let err = m.acquire("k", Some(SECS)).await.unwrap_err();
    assert!(err.to_string().to_lowercase().contains("revoked"), "{err}");

    // Asked for and missing: an error naming it, in every verifying mode.
    let missing = s.dir.join("missing.crl");
    let msg = connect_fails(
        &verify("verify-full", &format!("&sslcrl={}", missing.display())),
        "a missing sslcrl",
        BackendErrorKind::Tls,
    )
    .await;
    assert!(msg.contains("missing.crl"), "{msg}");
    // The lax modes check no certificate, so no list either.
    connects(
        &s.url(
            "localhost",
            port,
            &format!("sslmode=require&sslcrl={}", revoking.display()),
        ),
        "require with a revoking list",
    )
    .await;
}
