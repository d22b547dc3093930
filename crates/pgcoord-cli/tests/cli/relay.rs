//! A TCP relay to the test database that can be cut, as a network that
//! drops every packet: the server's session stays open and silent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP relay to the database that can be cut: from then on it forwards
/// nothing and closes nothing, as a network that drops every packet.
pub struct CuttableRelay {
    port: u16,
    cut: Arc<AtomicBool>,
}

impl CuttableRelay {
    /// A relay to `db`, and the URL of `db` through it; `None` (with a
    /// SKIPPED line) when the test database is not reached over TCP.
    pub async fn for_database(db: &pgcoord_testkit::pg::TestDatabase) -> Option<(Self, String)> {
        let config = db.config();
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => {
                println!("SKIPPED: the test database is not reached over TCP");
                return None;
            }
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let relay = Self::start((host, port)).await;
        let user = config.get_user().unwrap_or("postgres");
        let url = format!("postgres://{user}@127.0.0.1:{}/{}", relay.port, db.name());
        Some((relay, url))
    }

    async fn start(upstream: (String, u16)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, flag.clone()));
                tokio::spawn(pump(sr, cw, flag.clone()));
            }
        });
        Self { port, cut }
    }

    /// From now on nothing passes, on every connection.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// New connections pass again (those open at the cut stay silent).
    pub fn mend(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until cut; after the cut it holds both ends open
/// and forwards nothing (not even a close).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if cut.load(Ordering::SeqCst) {
            // Keep both halves alive for as long as the test runs.
            std::future::pending::<()>().await;
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
