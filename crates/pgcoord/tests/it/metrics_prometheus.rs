//! The Prometheus example's recorder, scraped over HTTP after a contended
//! run: the figures must match what the run did, every name follows the
//! Prometheus conventions with its HELP and TYPE, and the series of static
//! labels are there at 0 before anything happened, although the manager
//! was built before the recorder was installed. The recorder is
//! process-wide and would count the locks of every other test of this
//! binary: the run has a process of its own, this binary again on one
//! ignored test.

#[path = "../../examples/prometheus_metrics.rs"]
#[allow(dead_code)]
mod example;

use crate::common;

use std::collections::HashMap;
use std::net::SocketAddr;

use pgcoord::coordination::Election;
use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;
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

/// `# HELP` and `# TYPE` of every family, by name: (help, type).
fn families(body: &str) -> HashMap<String, (String, String)> {
    let mut out: HashMap<String, (String, String)> = HashMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.into()).or_default().0 = help.into();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.entry(name.into()).or_default().1 = kind.into();
        }
    }
    out
}

/// The naming rules of `promtool check metrics` that apply to our names:
/// snake case, counters end in `_total`, durations are in `_seconds`,
/// every family has a HELP text.
fn assert_conventions(families: &HashMap<String, (String, String)>) {
    for (name, (help, kind)) in families {
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{name}: not snake case"
        );
        assert!(!help.is_empty(), "{name}: no HELP");
        assert_eq!(
            kind == "counter",
            name.ends_with("_total"),
            "{name} ({kind}): _total is for counters"
        );
        if name.contains("duration") {
            assert!(
                name.ends_with("_seconds"),
                "{name}: a duration not in _seconds"
            );
        }
    }
}

const FAMILIES: &[(&str, &str)] = &[
    ("eventsource_lock_acquisitions_total", "counter"),
    ("eventsource_lock_acquire_duration_seconds", "histogram"),
    ("eventsource_lock_hold_duration_seconds", "histogram"),
    ("eventsource_lock_losses_total", "counter"),
    ("eventsource_lock_held", "gauge"),
    ("eventsource_lock_waiting", "gauge"),
    ("eventsource_lock_sessions", "gauge"),
    ("eventsource_lock_batch_size", "histogram"),
    ("eventsource_election_is_leader", "gauge"),
    ("eventsource_election_term", "gauge"),
    ("eventsource_election_transitions_total", "counter"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_metrics_match_a_contended_run() {
    let db = TestDatabase::create().await.unwrap();
    let run = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(common::worker_args(module_path!(), "contended_run"))
        .env("ES_METRICS_URL", db.url())
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && out.contains("test result: ok. 1 passed"),
        "the run in its own process failed ({}):\n{out}{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
}

fn manager(url: &str, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(holder)
        .build()
        .unwrap()
}

/// The run, in a process with no other test: the example's recorder
/// counts only what this run does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of scraped_metrics_match_a_contended_run"]
async fn contended_run() {
    let url = std::env::var("ES_METRICS_URL").expect("ES_METRICS_URL: run by its parent test");
    let addr: SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    // Every manager is built before the recorder exists: the names must
    // reach it anyway (when the first session opens).
    let (locks, other) = (manager(&url, "metrics"), manager(&url, "other"));
    let fenced = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id("leader")
        .fencing(true)
        .build()
        .unwrap();
    fenced.install_fencing().await.unwrap();
    // A lock taken before the recorder exists and released after: the
    // gauges show what is true (0 held; the batched sessions of both
    // managers open), not the changes since the recorder came (-1 held,
    // only the session `locks` opens below). `other` opens its session
    // here, so `locks` opens the first one the recorder sees.
    let early = other.acquire("metrics:early", None).await.unwrap();
    example::install(addr);
    early.release().await.unwrap();
    let election = Election::new(fenced, "metrics-election").expect("a fencing lock manager");
    let first = locks.try_lock("metrics:first").await.unwrap().unwrap();
    first.release().await.unwrap();

    // What has not happened yet shows as 0, not as nothing.
    let zero = samples(&scrape(addr).await);
    for (series, labels) in [
        (
            "eventsource_lock_acquisitions_total",
            &["outcome=\"timeout\""][..],
        ),
        (
            "eventsource_lock_losses_total",
            &["cause=\"lease_expired\""][..],
        ),
        (
            "eventsource_lock_losses_total",
            &["cause=\"timed_out\""][..],
        ),
        (
            "eventsource_lock_acquisitions_total",
            &["outcome=\"abandoned\""][..],
        ),
        ("eventsource_lock_held", &[][..]),
        ("eventsource_lock_waiting", &[][..]),
        (
            "eventsource_election_is_leader",
            &["election=\"metrics-election\""][..],
        ),
        ("eventsource_election_transitions_total", &[][..]),
    ] {
        assert!(
            zero.keys()
                .any(|k| k.starts_with(series) && labels.iter().all(|l| k.contains(l))),
            "{series} {labels:?} not registered: {zero:#?}"
        );
        assert_eq!(value(&zero, series, labels), 0.0, "{series}");
    }
    let batched = ["kind=\"batched\""];
    assert!(
        value(&zero, "eventsource_lock_sessions", &batched) >= 2.0,
        "{zero:#?}"
    );

    let leading = election.campaign(None).await.unwrap();
    let s = samples(&scrape(addr).await);
    let e = ["election=\"metrics-election\""];
    assert_eq!(value(&s, "eventsource_election_is_leader", &e), 1.0);
    assert_eq!(
        value(&s, "eventsource_election_term", &e),
        leading.term() as f64
    );
    assert_eq!(value(&s, "eventsource_election_transitions_total", &e), 1.0);
    leading.resign().await.unwrap();
    let s = samples(&scrape(addr).await);
    assert_eq!(value(&s, "eventsource_election_is_leader", &e), 0.0);
    assert_eq!(value(&s, "eventsource_election_transitions_total", &e), 2.0);

    let (tasks, rounds) = (4, 25);
    example::contend(&locks, &other, "metrics:hot", tasks, rounds).await;
    // A lock lost with its session: counted by cause.
    let k = "metrics:lost";
    let g = locks.acquire(k, None).await.unwrap();
    let client = common::connect(&url).await;
    for pid in locks.batched_session_pids() {
        common::terminate(&client, pid).await;
    }
    g.lost().await;
    drop(g);

    let body = scrape(addr).await;
    let found = families(&body);
    for (name, kind) in FAMILIES {
        let (help, k) = found
            .get(*name)
            .unwrap_or_else(|| panic!("{name} missing: {body}"));
        assert_eq!(k, kind, "{name}");
        assert!(!help.is_empty(), "{name}: no HELP");
    }
    assert_conventions(&found);
    let s = samples(&body);
    let acquisitions = "eventsource_lock_acquisitions_total";
    let granted = value(
        &s,
        acquisitions,
        &["operation=\"acquire\"", "outcome=\"granted\""],
    );
    // The contended rounds, the held one of `contend`, the lost one, the
    // campaign; the first lock is a `try_lock`, counted as its own operation.
    assert_eq!(granted, (tasks * rounds + 3) as f64, "{s:#?}");
    let tried = value(
        &s,
        acquisitions,
        &["operation=\"try_lock\"", "outcome=\"granted\""],
    );
    assert_eq!(tried, 1.0, "the first lock: {s:#?}");
    let waited = value(
        &s,
        acquisitions,
        &["outcome=\"granted\"", "waited=\"true\""],
    );
    assert!(waited > 0.0, "a contended run waits sometimes: {s:#?}");
    let contended = value(
        &s,
        acquisitions,
        &["operation=\"try_lock\"", "outcome=\"contended\""],
    );
    assert_eq!(contended, 1.0);
    // Every hold ended (the lost one when its guard was dropped; the
    // early one, taken before the recorder, too).
    let holds = value(&s, "eventsource_lock_hold_duration_seconds_count", &[]);
    assert_eq!(holds, (tasks * rounds + 5) as f64);
    let waits = value(&s, "eventsource_lock_acquire_duration_seconds_count", &[]);
    assert_eq!(waits, (tasks * rounds + 5) as f64);
    let past_30s = value(
        &s,
        "eventsource_lock_acquire_duration_seconds_bucket",
        &["le=\"60\""],
    );
    assert_eq!(past_30s, waits, "buckets reach past 30 s");
    assert_eq!(
        value(
            &s,
            "eventsource_lock_losses_total",
            &["cause=\"session_ended\""]
        ),
        1.0
    );
    assert_eq!(value(&s, "eventsource_lock_held", &[]), 0.0);
    assert_eq!(value(&s, "eventsource_lock_waiting", &[]), 0.0);
    assert!(value(&s, "eventsource_lock_sessions", &["kind=\"batched\""]) >= 1.0);
    assert!(value(&s, "eventsource_lock_batch_size_count", &[]) > 0.0);

    // Per key prefix (opt-in): held now, hold durations, losses; a new
    // prefix's series start at 0.
    let keyed = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id("keyed")
        .metrics_key_prefix(':', 10)
        .build()
        .unwrap();
    let p = ["key_prefix=\"jobs\""];
    let g = keyed.acquire("jobs:a", None).await.unwrap();
    let s = samples(&scrape(addr).await);
    assert_eq!(value(&s, "eventsource_lock_prefix_held", &p), 1.0);
    assert_eq!(
        value(&s, "eventsource_lock_prefix_losses_total", &p),
        0.0,
        "at 0"
    );
    let granted = ["key_prefix=\"jobs\"", "outcome=\"granted\""];
    assert_eq!(value(&s, acquisitions, &granted), 1.0);
    g.release().await.unwrap();
    let g = keyed.acquire("jobs:b", None).await.unwrap();
    for pid in keyed.batched_session_pids() {
        common::terminate(&client, pid).await;
    }
    g.lost().await;
    drop(g);
    let body = scrape(addr).await;
    assert_conventions(&families(&body));
    let s = samples(&body);
    assert_eq!(value(&s, "eventsource_lock_prefix_held", &p), 0.0);
    assert_eq!(
        value(
            &s,
            "eventsource_lock_prefix_hold_duration_seconds_count",
            &p
        ),
        2.0
    );
    assert_eq!(value(&s, "eventsource_lock_prefix_losses_total", &p), 1.0);
}
