//! `verify()` (and so `eventsource lock doctor`) reports the replication it
//! sees and what fencing guarantees there, and refuses an endpoint that
//! sends its sessions to several servers.

use crate::fault_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pgcoord::error::BackendErrorKind;
use pgcoord::{postgres::VerifyProblem, PostgresLockManager};
use pgcoord_testkit::locks::eventually_async;
use tokio::net::{TcpListener, TcpStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_server_and_a_primary_with_an_async_standby_are_told_apart() {
    let (primary, db) = fault_support::private_db(&[]).await;
    let m = PostgresLockManager::builder(db.config().into())
        .build()
        .unwrap();
    let alone = m.verify().await.unwrap().replication;
    assert_eq!(alone.standbys, 0, "{alone:?}");
    assert_eq!(alone.timeline, Some(1));
    assert!(alone.to_string().contains("no standby streams"), "{alone}");

    let p = primary.clone();
    let _standby = tokio::task::spawn_blocking(move || p.start_standby())
        .await
        .unwrap()
        .expect("a standby");
    let paired = streaming_report(&m).await;
    assert_eq!(paired.synchronous, Some(0), "a superuser sees the states");
    let text = paired.to_string();
    assert!(
        text.contains("1 standby(s) streaming (0 synchronous)")
            && text.contains("standbys stream asynchronously"),
        "{text}"
    );
}

/// The report once the standby streams.
async fn streaming_report(m: &PostgresLockManager) -> pgcoord::postgres::Replication {
    let seen = Arc::new(std::sync::Mutex::new(None));
    eventually_async("the standby streams", || {
        let seen = seen.clone();
        async move {
            let r = m.verify().await.unwrap().replication;
            let streaming = r.standbys == 1;
            *seen.lock().unwrap() = Some(r);
            streaming
        }
    })
    .await;
    let r = seen.lock().unwrap().take().unwrap();
    r
}

/// Forwards each new connection to the next of `upstreams` in turn, as a
/// load balancer over several servers does.
async fn round_robin(upstreams: Vec<u16>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let next = AtomicUsize::new(0);
    tokio::spawn(async move {
        while let Ok((mut down, _)) = listener.accept().await {
            let target = upstreams[next.fetch_add(1, Ordering::Relaxed) % upstreams.len()];
            tokio::spawn(async move {
                if let Ok(mut up) = TcpStream::connect(("127.0.0.1", target)).await {
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_spreads_sessions_over_two_servers_is_refused() {
    let (a, db) = fault_support::private_db(&[]).await;
    let (b, other) = fault_support::private_db(&[]).await;
    // The same database name on both, as behind a real balancer.
    let admin = other.connect().await.unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE \"{}\"", db.name()))
        .await
        .unwrap();
    let port = round_robin(vec![a.port(), b.port()]).await;
    let url = format!("postgres://postgres@127.0.0.1:{port}/{}", db.name());
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .build()
        .unwrap();
    let err = m.verify().await.unwrap_err();
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(backend.kind(), BackendErrorKind::NotPostgres, "{err}");
    let problem = std::error::Error::source(backend)
        .and_then(|s| s.downcast_ref::<VerifyProblem>())
        .expect("a verify problem");
    assert!(
        matches!(problem, VerifyProblem::SeveralServers { .. }),
        "{problem}"
    );
}
