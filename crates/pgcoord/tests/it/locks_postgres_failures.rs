//! `PostgresLockManager` when something outside it fails: no server, a
//! server that is not PostgreSQL, a bad URL (typed errors, no password in
//! them, nothing held or left open), and a holder's process killed (the
//! server frees its lock).

use crate::common;

use std::time::Duration;

use common::manager;
use pgcoord::PostgresLockManager;
use pgcoord::{error::BackendErrorKind, DistributedLock, LockRegistry};
use pgcoord_testkit::pg::TestDatabase;

fn key(name: &str) -> String {
    format!("pg:{name}:{}", uuid::Uuid::new_v4())
}

#[tokio::test]
async fn unreachable_server_is_a_typed_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let m = format!("postgres://nobody:secret@127.0.0.1:{port}/x")
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let err = m
        .acquire("k", Some(Duration::from_secs(5)))
        .await
        .unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), BackendErrorKind::Connect);
    assert!(!err.to_string().contains("secret"));
    let err = m
        .try_lock("k")
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap_err();
    assert_eq!(err.as_backend().unwrap().kind(), BackendErrorKind::Connect);
    assert_eq!(m.held_lock_count(), 0);
    assert_eq!(m.session_count(), 0);
}

#[tokio::test]
async fn a_server_that_is_not_postgres_is_a_typed_error() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s
                .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\nnot postgres")
                .await;
        }
    });
    let m = format!("postgres://u@127.0.0.1:{port}/x")
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let err = m
        .acquire("k", Some(Duration::from_secs(5)))
        .await
        .unwrap_err();
    let kind = err.as_backend().expect("backend error").kind();
    assert!(
        matches!(
            kind,
            BackendErrorKind::NotPostgres | BackendErrorKind::Connect
        ),
        "{err}"
    );
    assert_eq!(m.held_lock_count(), 0);
}

#[tokio::test]
async fn bad_url_is_invalid_argument() {
    let err = "postgres://host:notaport/db"
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap_err();
    assert!(matches!(err, pgcoord::Error::InvalidArgument(_)), "{err:?}");
}

/// Run by `holder_crash_releases_the_lock` in a child process: takes the
/// lock, reports it, and waits to be killed.
#[tokio::test]
#[ignore = "a child process of the tests in this file"]
async fn child_holder() {
    let var =
        |n: &str| std::env::var(n).expect("a child process, started by the tests in this file");
    let (url, k) = (var("ES_CHILD_URL"), var("ES_CHILD_KEY"));
    let m = url
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let _g = m.acquire(&k, None).await.unwrap();
    println!("HELD");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_crash_releases_the_lock() {
    use std::io::BufRead;
    let db = &TestDatabase::create().await.unwrap();
    let k = key("crash");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(common::worker_args(module_path!(), "child_holder"))
        .arg("--nocapture")
        .env("ES_CHILD_URL", db.url())
        .env("ES_CHILD_KEY", &k)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stdout).lines() {
            if line.as_deref().map(|l| l.contains("HELD")).unwrap_or(false) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), rx)
        .await
        .unwrap()
        .unwrap();
    let m = manager(db, "survivor");
    assert!(
        m.try_lock(&k)
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))
            .unwrap()
            .is_none(),
        "child does not hold it"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let g = m.acquire(&k, Some(Duration::from_secs(30))).await.unwrap();
    g.release().await.unwrap();
}
