//! Serves the lock manager's metrics for Prometheus on a local HTTP
//! endpoint, while a few tasks contend for one key.
//!
//! ```sh
//! cargo run -p pgcoord --example prometheus_metrics            # a throwaway PostgreSQL
//! DATABASE_URL=postgres://app@db/app cargo run -p pgcoord --example prometheus_metrics
//! curl -s http://127.0.0.1:9184/metrics | grep eventsource_lock
//! ```
//!
//! `METRICS_ADDR` changes the address (default `127.0.0.1:9184`). The
//! recorder is installed before the manager is built, the usual order
//! (built the other way round, the names are described and registered at
//! 0 when the manager opens its first session). Histograms get explicit buckets (up to 120 s, so that
//! long waits are not all in `+Inf`).

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

/// Bucket bounds, in seconds, for the duration histograms.
pub const DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0,
];

/// Installs the Prometheus recorder with an HTTP listener on `addr`.
pub fn install(addr: SocketAddr) {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
        .expect("valid buckets")
        .set_buckets_for_metric(
            Matcher::Full("eventsource_lock_batch_size".into()),
            &[1.0, 2.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0],
        )
        .expect("valid buckets")
        .install()
        .expect("the Prometheus recorder installs (and its port is free)");
}

/// `tasks` tasks each take `key` `rounds` times (contended), holding it
/// for a moment; then `other` (another manager) tries it while it is held.
pub async fn contend(
    locks: &PostgresLockManager,
    other: &PostgresLockManager,
    key: &str,
    tasks: usize,
    rounds: usize,
) {
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (locks, key) = (locks.clone(), key.to_owned());
        handles.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = locks
                    .acquire(&key, Some(Duration::from_secs(30)))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                guard.release().await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let held = locks.acquire(key, None).await.unwrap();
    assert!(other
        .try_lock(key)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .is_none());
    held.release().await.unwrap();
}

#[allow(dead_code)] // the test includes this file for `install` and `contend`
#[tokio::main]
async fn main() {
    let addr: SocketAddr = std::env::var("METRICS_ADDR")
        .unwrap_or_else(|_| "127.0.0.1:9184".into())
        .parse()
        .expect("METRICS_ADDR is host:port");
    install(addr);
    let _keep;
    let url = match std::env::var("DATABASE_URL") {
        Ok(url) => url,
        Err(_) => {
            let db = pgcoord_testkit::pg::TestDatabase::create()
                .await
                .expect("a throwaway PostgreSQL (initdb and pg_ctl must be installed)");
            let url = db.url();
            _keep = db;
            url
        }
    };
    let build = || -> pgcoord::Result<PostgresLockManager> {
        PostgresLockManager::builder(url.parse::<pgcoord::ConnectOptions>()?).build()
    };
    let locks = build().expect("a valid URL");
    let other = build().expect("a valid URL");
    println!("serving metrics on http://{addr}/metrics; contending...");
    contend(&locks, &other, "example:metrics", 4, 50).await;
    println!("done: 200 contended acquisitions, 1 contended try; Ctrl-C to stop serving");
    tokio::signal::ctrl_c().await.ok();
}
