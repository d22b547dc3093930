//! The bad-input matrix: each case is a typed error (or, for odd but valid
//! keys, a working lock), and nothing leaks: no held lock, no session, no
//! row in `pg_locks`. Passwords: `bad_input_passwords.rs`.

use crate::common;
use crate::fault_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fault_support::*;
use pgcoord::PostgresLockManager;
use pgcoord::{
    error::{AcquireFailure, BackendErrorKind},
    lock_id_for_key, DistributedLock, LockRegistry,
};
use pgcoord_testkit::locks::eventually;

const SECS: Duration = Duration::from_secs(30);

pub(crate) async fn assert_nothing_held(m: &PostgresLockManager) {
    assert_eq!(m.held_lock_count(), 0);
    eventually("no session left open", SECS, || m.session_count() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_keys_lock_and_huge_keys_are_refused_before_any_io() {
    let db = common::shared_db().await;
    let client = db.connect().await.unwrap();
    let m = common::manager(db, "odd-keys");
    let other = common::manager(db, "odd-keys-other");

    // Over 1 MiB: refused before any I/O.
    let huge = "k".repeat((1 << 20) + 1);
    for timeout in [None, Some(Duration::ZERO), Some(SECS)] {
        let err = m.acquire(&huge, timeout).await.unwrap_err();
        assert!(
            matches!(
                err.as_lock_acquisition().map(|e| &e.reason),
                Some(AcquireFailure::KeyTooLong { len, .. }) if *len == (1 << 20) + 1
            ),
            "{err:?}"
        );
    }
    assert!(m
        .try_lock(&huge)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .is_err());
    assert!(m.release(&huge).await.unwrap_err().is_not_held());
    assert_eq!(m.session_count(), 0, "a refused key opened a session");

    // Empty, NUL and non-ASCII keys are ordinary keys, distinct from each other.
    let nonce = uuid::Uuid::new_v4().to_string();
    let keys = [
        String::new(),
        format!("a\0b{nonce}"),
        format!("a\0c{nonce}"),
        format!("ключ-🔒-{nonce}"),
        format!("\u{202e}rtl{nonce}"),
    ];
    let mut ids: Vec<i64> = keys.iter().map(|k| lock_id_for_key(k)).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), keys.len());
    let mut guards = Vec::new();
    for k in &keys {
        let g = m.acquire(k, Some(SECS)).await.unwrap();
        assert_eq!(&*g.info().key, k.as_str());
        assert!(
            other
                .try_lock(k)
                .await
                .map(|g| g.map(pgcoord::LockGuard::into_manual))
                .unwrap()
                .is_none(),
            "{k:?} not excluded"
        );
        guards.push(g);
    }
    assert_eq!(m.held_lock_count(), keys.len());
    for g in guards {
        g.release().await.unwrap();
    }
    for id in ids {
        assert_eq!(common::lock_rows(&client, id).await, (0, 0));
    }
    m.close().await.unwrap();
    other.close().await.unwrap();
    assert_nothing_held(&m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_hosts_are_typed_connect_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = listener.local_addr().unwrap().port();
    drop(listener);
    for (url, server) in [
        (
            format!("postgres://app:hunter2-secret@127.0.0.1:{closed_port}/x"),
            format!("127.0.0.1:{closed_port}"),
        ),
        (
            "postgres://app:hunter2-secret@no-such-host.invalid/x".to_owned(),
            "no-such-host.invalid:5432".to_owned(),
        ),
    ] {
        let m = PostgresLockManager::builder(url.parse().unwrap())
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        for timeout in [None, Some(Duration::from_secs(5))] {
            let err = tokio::time::timeout(SECS, m.acquire("k", timeout))
                .await
                .expect("hung on an unreachable host")
                .unwrap_err();
            assert_eq!(
                err.as_backend().map(|b| b.kind()),
                Some(BackendErrorKind::Connect),
                "{err:?}"
            );
            assert!(!format!("{err} {err:?}").contains("hunter2"));
            // The error says which server refused: the driver's own
            // "Connection refused" does not.
            assert!(err.to_string().contains(&server), "{err}");
            assert_each_cause_said_once(&err);
        }
        let err = m
            .try_lock("k")
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))
            .unwrap_err();
        assert_eq!(
            err.as_backend().map(|b| b.kind()),
            Some(BackendErrorKind::Connect)
        );
        assert!(m.holders(&[]).await.is_err());
        assert_nothing_held(&m).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_are_not_postgres_are_typed_errors() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // One answers garbage, one accepts and says nothing.
    let garbage = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (gp, sp) = (
        garbage.local_addr().unwrap().port(),
        silent.local_addr().unwrap().port(),
    );
    tokio::spawn(async move {
        while let Ok((mut s, _)) = garbage.accept().await {
            tokio::spawn(async move {
                // Read the client's first message whole (so closing sends
                // FIN, not RST), answer garbage, close our side.
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).await.is_err() {
                    return;
                }
                let mut rest = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                let _ = s.read_exact(&mut rest).await;
                let _ = s
                    .write_all(b"SSH-2.0-OpenSSH_9.2\r\nthis is not postgres at all\r\n")
                    .await;
                let _ = s.shutdown().await;
                let mut sink = Vec::new();
                let _ = s.read_to_end(&mut sink).await;
            });
        }
    });
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = held.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = silent.accept().await {
            h.lock().unwrap().push(s);
        }
    });
    let m = format!("postgres://u@127.0.0.1:{gp}/x")
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let err = m.acquire("k", Some(SECS)).await.unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::NotPostgres),
        "{err:?}"
    );
    assert!(err.to_string().contains("PostgreSQL"), "{err}");
    assert_nothing_held(&m).await;

    let m = PostgresLockManager::builder(format!("postgres://u@127.0.0.1:{sp}/x").parse().unwrap())
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    // The caller's timeout bounds the wait for the silent server...
    let err = tokio::time::timeout(SECS, m.acquire("k", Some(Duration::from_millis(300))))
        .await
        .expect("hung on a silent server")
        .unwrap_err();
    assert!(err.is_timeout() || err.as_backend().is_some(), "{err:?}");
    // ...and the connect timeout bounds try_acquire, which has none. (Not
    // on "k": until the session gives up connecting, the abandoned request
    // above still reserves it, and try_acquire would say "busy".)
    let err = tokio::time::timeout(SECS, m.try_lock("k2"))
        .await
        .expect("hung on a silent server")
        .unwrap_err();
    assert_eq!(
        err.as_backend().map(|b| b.kind()),
        Some(BackendErrorKind::Connect),
        "{err:?}"
    );
    assert_nothing_held(&m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_manager_refuses_everything() {
    let db = common::shared_db().await;
    let m = common::manager(db, "closed");
    let k = format!("closed-{}", uuid::Uuid::new_v4());
    let g = m.acquire(&k, None).await.unwrap();
    assert_eq!(m.close().await.unwrap(), 1);
    assert!(g.is_lost(), "a guard released by close() must report it");
    for timeout in [None, Some(Duration::ZERO), Some(SECS)] {
        let err = m.acquire(&k, timeout).await.unwrap_err();
        assert!(
            matches!(
                err.as_lock_acquisition().map(|e| &e.reason),
                Some(AcquireFailure::ManagerClosed)
            ),
            "{err:?}"
        );
    }
    let err = m
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap_err();
    assert!(matches!(
        err.as_lock_acquisition().map(|e| &e.reason),
        Some(AcquireFailure::ManagerClosed)
    ));
    assert!(m.release(&k).await.unwrap_err().is_not_held());
    // The guard's own release says why its lock is gone.
    let err = g.release().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err:?}");
    assert!(
        err.to_string().contains("the lock manager was closed"),
        "{err}"
    );
    assert_nothing_held(&m).await;
    // Closing twice is fine.
    assert_eq!(m.close().await.unwrap(), 0);
}

/// Settings too large for any server, or a holder id PostgreSQL refuses,
/// are an `InvalidArgument` from `build`, not a panic, an abort on a huge
/// allocation, or a failure of every later acquisition.
#[test]
fn build_refuses_session_counts_past_max_connections_and_a_nul_holder_id() {
    let options = || "postgres://app@127.0.0.1:1/app".parse().unwrap();
    type Set = fn(
        pgcoord::postgres::PostgresLockManagerBuilder,
    ) -> pgcoord::postgres::PostgresLockManagerBuilder;
    let cases: [(&str, Set); 5] = [
        ("batched_sessions", |b| b.batched_sessions(usize::MAX)),
        ("batched_sessions", |b| b.batched_sessions(1 << 32)),
        ("max_batched_sessions", |b| b.max_batched_sessions(1 << 32)),
        ("max_wait_sessions", |b| b.max_wait_sessions(usize::MAX)),
        ("holder_id", |b| b.holder_id("a\0b")),
    ];
    for (name, set) in cases {
        match set(PostgresLockManager::builder(options())).build() {
            Err(pgcoord::Error::InvalidArgument(msg)) => {
                assert!(msg.starts_with(name), "{name}: {msg}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // The largest counts PostgreSQL could serve still build.
    PostgresLockManager::builder(options())
        .max_wait_sessions(262_143)
        .build()
        .unwrap();
}
