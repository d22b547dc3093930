//! The Prometheus example's recorder, scraped over HTTP after a contended
//! run: the figures must match what the run did. One test per binary (the
//! recorder is process-wide).
#![cfg(all(feature = "postgres", feature = "metrics"))]

#[path = "../examples/prometheus_metrics.rs"]
#[allow(dead_code)]
mod example;

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;

use pgcoord::DistributedLock;
use pgcoord_testkit::pg::TestDatabase;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET /metrics`, the body.
async fn scrape(addr: SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// Sample lines `name{labels} value`, summed by `name{labels}`.
fn samples(body: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        *out.entry(series.to_owned()).or_default() += value.parse::<f64>().unwrap();
    }
    out
}

fn value(s: &HashMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    s.iter()
        .filter(|(series, _)| {
            let (n, rest) = series.split_once('{').unwrap_or((series.as_str(), ""));
            n == name && labels.iter().all(|l| rest.contains(l))
        })
        .map(|(_, v)| *v)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_metrics_match_a_contended_run() {
    let addr: SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    example::install(addr);
    let db = TestDatabase::create().await.unwrap();
    let (locks, other) = (
        common::manager(&db, "metrics"),
        common::manager(&db, "other"),
    );
    let (tasks, rounds) = (4, 25);
    example::contend(&locks, &other, "metrics:hot", tasks, rounds).await;
    // A lock lost with its session: counted by cause.
    let k = "metrics:lost";
    let g = locks.acquire(k, None).await.unwrap();
    let client = db.connect().await.unwrap();
    for pid in locks.shared_session_pids() {
        common::terminate(&client, pid).await;
    }
    g.lost().await;
    drop(g);

    let s = samples(&scrape(addr).await);
    let acquisitions = "eventsource_lock_acquisitions";
    let granted = value(
        &s,
        acquisitions,
        &["operation=\"acquire\"", "outcome=\"granted\""],
    );
    // The contended rounds, the held one of `contend`, and the lost one.
    assert_eq!(granted, (tasks * rounds + 2) as f64, "{s:#?}");
    let waited = value(
        &s,
        acquisitions,
        &["outcome=\"granted\"", "waited=\"true\""],
    );
    assert!(waited > 0.0, "a contended run waits sometimes: {s:#?}");
    let contended = value(
        &s,
        acquisitions,
        &["operation=\"try_acquire\"", "outcome=\"contended\""],
    );
    assert_eq!(contended, 1.0);
    // Every hold ended (the lost one when its guard was dropped).
    let holds = value(&s, "eventsource_lock_hold_duration_count", &[]);
    assert_eq!(holds, (tasks * rounds + 2) as f64);
    let waits = value(&s, "eventsource_lock_acquire_duration_count", &[]);
    assert_eq!(waits, (tasks * rounds + 3) as f64);
    let past_30s = value(
        &s,
        "eventsource_lock_acquire_duration_bucket",
        &["le=\"60\""],
    );
    assert_eq!(past_30s, waits, "buckets reach past 30 s");
    assert_eq!(
        value(&s, "eventsource_lock_losses", &["cause=\"session_ended\""]),
        1.0
    );
    assert_eq!(value(&s, "eventsource_lock_held", &[]), 0.0);
    assert_eq!(value(&s, "eventsource_lock_waiting", &[]), 0.0);
    assert!(value(&s, "eventsource_lock_session_count", &["kind=\"shared\""]) >= 1.0);
    assert!(value(&s, "eventsource_lock_batch_size_count", &[]) > 0.0);
}
