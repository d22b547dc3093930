//! Every session the crate opens over TCP lowers the server's TCP timeouts
//! (`tcp_user_timeout`, keepalives) to about 15 s, keeps the server's own
//! when they are shorter, and gives a held lock's loss signal the bound
//! they set: until when the server cannot have freed the lock for silence.
//! Over a Unix socket nothing bounds it. (A real network cut, the reason
//! for all this, is measured in docs/reliability.md; here the settings and
//! the bound are checked.)

use crate::fault_support::*;

use std::time::{Duration, Instant};

use pgcoord::inspect::connect_for_inspection;
use pgcoord::{ConnectOptions, DistributedLock, PostgresLockManager};

/// How long after `now` the guard's loss signal says the server keeps its
/// session at least, for a manager on `url`.
async fn bound_after_acquire(url: &str) -> Option<Duration> {
    let options: ConnectOptions = url.parse().unwrap();
    let mgr = PostgresLockManager::builder(options)
        .holder_id("tcp-timeouts")
        .build()
        .unwrap();
    let guard = mgr
        .acquire(&key("tcp-timeouts"), Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let now = Instant::now();
    let bound = guard
        .loss_signal()
        .confirmed_until()
        .map(|until| until.saturating_duration_since(now));
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    mgr.close().await.unwrap();
    bound
}

async fn shown(url: &str, setting: &str) -> String {
    let client = connect_for_inspection(url.parse().unwrap(), Duration::from_secs(30))
        .await
        .unwrap();
    let row = client
        .query_one(&format!("SHOW {setting}"), &[])
        .await
        .unwrap();
    row.get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_sessions_bound_how_long_the_server_keeps_them_silent() {
    let (cluster, db) = private_db(&[]).await;
    let tcp = format!(
        "postgres://postgres@127.0.0.1:{}/{}",
        cluster.port(),
        db.name()
    );

    // The crate's own timeouts: confirmed for 13.5 s after each answer
    // (a tenth less than 15 s), so well past half of 15 s from now.
    let bound = bound_after_acquire(&tcp).await.expect("a bound over TCP");
    assert!(
        bound > Duration::from_millis(7_500) && bound <= Duration::from_secs(15),
        "{bound:?}"
    );
    assert_eq!(shown(&tcp, "tcp_user_timeout").await, "15000");
    assert_eq!(shown(&tcp, "tcp_keepalives_idle").await, "5");
    assert_eq!(shown(&tcp, "tcp_keepalives_interval").await, "2");
    assert_eq!(shown(&tcp, "tcp_keepalives_count").await, "5");

    // A shorter timeout of the server's (here the session's options, as
    // an ALTER ROLE or postgresql.conf would set it) is kept, and bounds.
    let short = format!("{tcp}?options=-c%20tcp_user_timeout%3D4000");
    let bound = bound_after_acquire(&short).await.expect("a bound over TCP");
    assert!(bound <= Duration::from_secs(4), "{bound:?}");
    assert_eq!(shown(&short, "tcp_user_timeout").await, "4000");
    assert_eq!(shown(&short, "tcp_keepalives_idle").await, "5");

    // Over a Unix socket the server has no such timeout: no bound.
    let unix = format!(
        "host={} port={} dbname={} user=postgres",
        cluster.dir().display(),
        cluster.port(),
        db.name()
    );
    assert_eq!(bound_after_acquire(&unix).await, None);
}

/// A server that completes the startup (no TLS, no password) and then
/// never answers a statement, as a pooler that accepted a client but
/// cannot reach its server: its port.
async fn greets_then_goes_silent() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        loop {
            let len = socket.read_u32().await.unwrap() as usize;
            let mut body = vec![0; len - 4];
            socket.read_exact(&mut body).await.unwrap();
            if body[..4] == 80877103u32.to_be_bytes() {
                socket.write_all(b"N").await.unwrap(); // no TLS
                continue;
            }
            // AuthenticationOk, then ReadyForQuery (idle).
            socket
                .write_all(b"R\0\0\0\x08\0\0\0\0Z\0\0\0\x05I")
                .await
                .unwrap();
            break;
        }
        let mut sink = vec![0; 4096];
        while socket.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    });
    port
}

/// An inspection session whose server accepts it and then answers nothing
/// is refused within the connect timeout, as a server that did not answer;
/// before, it was handed over, and the caller's first query then waited
/// behind the unanswered setup statement (`lock holders` said "no answer
/// within 30s" after 40 s behind a PgBouncer cut from its server).
#[tokio::test]
async fn an_inspection_session_whose_server_goes_silent_after_the_startup_is_refused() {
    let port = greets_then_goes_silent().await;
    let options: ConnectOptions = format!("postgres://u@127.0.0.1:{port}/x?sslmode=disable")
        .parse()
        .unwrap();
    let err = connect_for_inspection(options, Duration::from_millis(500))
        .await
        .expect_err("a session whose first statement got no answer");
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(
        backend.kind(),
        pgcoord::error::BackendErrorKind::NoAnswer,
        "{err}"
    );
    assert!(
        err.to_string().contains("first statement got no answer"),
        "{err}"
    );
}
