//! A TCP relay that can be pointed at another server: the fixed address a
//! multi-host URL names while the servers behind it change roles.
//!
//! [`Relay::point_to`] sends new connections to another port (or, with
//! `None`, swallows them: an unreachable host, which a client's
//! `connect_timeout` skips). Connections opened before it go silent, as
//! behind a network partition: their bytes are read and dropped both ways
//! and their sockets stay open, so neither end is told. A server that
//! closes a current connection (a crash, a restart) closes it for the
//! client too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

struct Route {
    upstream: Mutex<Option<u16>>,
    /// Bumped by every `point_to`: a connection of an older one is cut.
    generation: AtomicU64,
}

pub struct Relay {
    pub port: u16,
    route: Arc<Route>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    pub async fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let route = Arc::new(Route {
            upstream: Mutex::new(Some(upstream)),
            generation: AtomicU64::new(0),
        });
        let r = route.clone();
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                tokio::spawn(carry(down, r.clone()));
            }
        });
        Relay { port, route, task }
    }

    /// New connections go to `upstream` (`None`: nowhere); open ones are cut.
    pub fn point_to(&self, upstream: Option<u16>) {
        *self.route.upstream.lock().unwrap() = upstream;
        self.route.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn carry(down: TcpStream, route: Arc<Route>) {
    let generation = route.generation.load(Ordering::SeqCst);
    let upstream = *route.upstream.lock().unwrap();
    let up = match upstream {
        Some(port) => TcpStream::connect(("127.0.0.1", port)).await.ok(),
        None => None,
    };
    let Some(up) = up else {
        if upstream.is_none() {
            swallow(down).await; // a host that never answers
        }
        return; // refused: the client sees the connection close at once
    };
    let _ = (down.set_nodelay(true), up.set_nodelay(true));
    let (dr, dw) = down.into_split();
    let (ur, uw) = up.into_split();
    tokio::join!(
        pump(dr, uw, generation, route.clone()),
        pump(ur, dw, generation, route)
    );
}

/// Reads and drops everything, keeping the socket open until the peer closes it.
async fn swallow(mut s: TcpStream) {
    let mut buf = vec![0u8; 8192];
    while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    std::future::pending::<()>().await;
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, generation: u64, route: Arc<Route>) {
    let current = || route.generation.load(Ordering::SeqCst) == generation;
    let mut buf = vec![0u8; 16384];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if current() && to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    if current() {
        let _ = to.shutdown().await;
    } else {
        // Cut: the other end must not learn anything, not even a close.
        std::future::pending::<()>().await;
    }
}
