//! A TCP proxy that counts the server's ReadyForQuery messages per
//! connection: round trips, counted, not timed.
#![allow(dead_code)] // not every suite uses every part

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Counts ReadyForQuery messages (one per completed round trip) that the
/// server sends through it, per connection.
pub struct CountingProxy {
    pub port: u16,
    ready: Arc<std::sync::Mutex<Vec<Arc<AtomicU64>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    pub async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ready = Arc::new(std::sync::Mutex::new(Vec::new()));
        let counters = ready.clone();
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let counter = Arc::new(AtomicU64::new(0));
                counters.lock().unwrap().push(counter.clone());
                tokio::spawn(async move {
                    let up = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
                    let (mut dr, mut dw) = down.into_split();
                    let (mut ur, mut uw) = up.into_split();
                    tokio::spawn(async move { tokio::io::copy(&mut dr, &mut uw).await });
                    // Server to client: typed messages (sslmode=disable, so
                    // no one-byte SSL answer comes first). Count, then forward.
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut header = Vec::with_capacity(5);
                    let mut skip = 0usize;
                    while let Ok(n) = ur.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let mut i = 0;
                        while i < n {
                            if skip > 0 {
                                let s = skip.min(n - i);
                                skip -= s;
                                i += s;
                                continue;
                            }
                            header.push(buf[i]);
                            i += 1;
                            if header.len() == 5 {
                                if header[0] == b'Z' {
                                    counter.fetch_add(1, Ordering::SeqCst);
                                }
                                let len = u32::from_be_bytes(header[1..5].try_into().unwrap());
                                skip = len as usize - 4;
                                header.clear();
                            }
                        }
                        if dw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { port, ready, task }
    }
}

impl CountingProxy {
    /// The count of every connection so far.
    pub fn counts(&self) -> Vec<u64> {
        let all = self.ready.lock().unwrap();
        all.iter().map(|c| c.load(Ordering::SeqCst)).collect()
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
