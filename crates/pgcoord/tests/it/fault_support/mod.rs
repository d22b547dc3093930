//! Helpers of the fault-injection suites (`tests/it/faults_*.rs`).
//!
//! Every fault test runs on a private cluster of its own
//! ([`private_cluster`]): terminating backends, restarting the server or
//! cutting connections must never reach the shared test server.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgcoord_testkit::pg::{ClusterOptions, TestCluster, TestDatabase};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A private cluster with extra `-c` settings; boots in a blocking task.
pub async fn private_cluster(settings: &[(&str, &str)]) -> Arc<TestCluster> {
    let options = ClusterOptions {
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let cluster = tokio::task::spawn_blocking(move || TestCluster::start_with(options))
        .await
        .unwrap()
        .expect("private cluster");
    Arc::new(cluster)
}

/// A private cluster and a fresh database on it.
pub async fn private_db(settings: &[(&str, &str)]) -> (Arc<TestCluster>, TestDatabase) {
    let cluster = private_cluster(settings).await;
    let db = TestDatabase::create_on(cluster.clone())
        .await
        .expect("database");
    (cluster, db)
}

pub fn key(name: &str) -> String {
    format!("fault:{name}:{}", uuid::Uuid::new_v4())
}

/// `pg_terminate_backend(pid)`, asserting it found the backend.
#[allow(unused_imports)] // not every fault suite terminates backends
pub use crate::common::terminate;

/// Granted advisory locks of the current database, over every session.
pub async fn advisory_locks(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Server sessions whose `application_name` is `eventsource/<holder>`.
pub async fn sessions_of(client: &tokio_postgres::Client, holder: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&format!("eventsource/{holder}")],
        )
        .await
        .unwrap()
        .get(0)
}

/// The pid of the session that holds `lock_id` granted, if any.
pub async fn holder_pid(client: &tokio_postgres::Client, lock_id: i64) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&lock_id],
        )
        .await
        .unwrap()
        .map(|r| r.get(0))
}

/// The pid of the session waiting for `lock_id`, if any.
pub async fn waiter_pid(client: &tokio_postgres::Client, lock_id: i64) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND NOT granted \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&lock_id],
        )
        .await
        .unwrap()
        .map(|r| r.get(0))
}

/// Waits (generously) for the loss signal of `guard`.
pub async fn assert_lost(guard: &pgcoord::LockGuard, what: &str) {
    tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("loss signal never fired: {what}"));
    assert!(guard.is_lost());
}

/// What a [`Proxy`] does with the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProxyMode {
    /// Forward both ways.
    Forward = 0,
    /// Read and discard both ways, never closing: a silent network.
    BlackHole = 1,
}

/// A TCP proxy in front of a server, for cutting connections silently.
///
/// In [`ProxyMode::BlackHole`] it keeps reading from both sides (so the
/// peers' kernels see their data acknowledged, as behind a broken middlebox
/// that still speaks TCP) and forwards nothing; sockets stay open.
pub struct Proxy {
    pub port: u16,
    mode: Arc<AtomicU8>,
    /// The first 8 bytes each client sent (length and request code of the
    /// startup, SSL or cancel request), per connection in accept order.
    pub openings: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The request code of PostgreSQL's SSLRequest (bytes 4..8 of it).
pub const SSL_REQUEST_CODE: [u8; 4] = 80877103u32.to_be_bytes();

impl Proxy {
    pub async fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(ProxyMode::Forward as u8));
        let m = mode.clone();
        let openings = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = openings.clone();
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let m = m.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
                        return;
                    };
                    let mut down = down;
                    let mut first = [0u8; 8];
                    if down.read_exact(&mut first).await.is_err() {
                        return;
                    }
                    seen.lock().unwrap().push(first.to_vec());
                    if up.write_all(&first).await.is_err() {
                        return;
                    }
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    let a = tokio::spawn(pump(dr, uw, m.clone()));
                    let b = tokio::spawn(pump(ur, dw, m));
                    let _ = tokio::join!(a, b);
                });
            }
        });
        Proxy {
            port,
            mode,
            openings,
            task,
        }
    }

    pub fn set_mode(&self, mode: ProxyMode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU8>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut silent = false;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) if !silent && mode.load(Ordering::SeqCst) == 0 => return,
            Ok(0) | Err(_) => {
                // Silent: never pass the close on either.
                std::future::pending::<()>().await;
                return;
            }
            Ok(n) => n,
        };
        if mode.load(Ordering::SeqCst) == ProxyMode::BlackHole as u8 {
            silent = true;
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Walks `e`'s `source()` chain as anyhow's `{:#}` prints it and fails if
/// a cause repeats what the layers above it already said.
pub fn assert_each_cause_said_once(e: &(dyn std::error::Error + 'static)) {
    let mut said = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        assert!(!said.contains(&text), "{text:?} repeats {said:?}");
        // A driver's text of a server error (`db error: FATAL: MESSAGE`,
        // then DETAIL and HINT lines) repeats a message said above too.
        for line in text.lines() {
            let line = line.strip_prefix("db error: ").unwrap_or(line);
            let words = ["ERROR: ", "FATAL: ", "PANIC: "]
                .iter()
                .find_map(|p| line.strip_prefix(p))
                .unwrap_or(line);
            assert!(!said.contains(words), "{words:?} repeats {said:?}");
        }
        said.push_str(&text);
        cause = c.source();
    }
}
