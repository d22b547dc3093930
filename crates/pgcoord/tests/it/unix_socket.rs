//! Unix-domain sockets, as libpq connects over them: a socket directory as
//! the host (`host=/run/postgresql`, libpq's default where no host is
//! given) works with every `sslmode`, without TLS (PostgreSQL has none on
//! a socket) and without a CA file for the verifying modes, for the lock
//! sessions, their query cancels and the read-model pool.

use crate::common;
use crate::tls_support;

use std::time::Duration;

use pgcoord::readmodels::postgres::PostgresDatabase;
use pgcoord::readmodels::{schema, Dialect, Query, ReadModelRepository};
use pgcoord::{lock_id_for_key, DistributedLock, PostgresLockManager};
use pgcoord_testkit::locks::eventually_async;
use pgcoord_testkit::readmodels::ConformanceItem as Item;
use tls_support::setup;

const SECS: Duration = Duration::from_secs(30);
const MODES: [&str; 5] = ["disable", "prefer", "require", "verify-ca", "verify-full"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sslmode_locks_and_cancels_over_a_socket_without_tls() {
    // The cluster serves TLS on TCP (and role `app` must use it there);
    // its socket is trusted, as a stock Debian server's is.
    let s = setup().await;
    let admin = s.db.connect().await.unwrap();
    let blocker = common::manager(&s.db, "blocker");
    let missing = s.dir.join("no-such-ca.pem");
    for mode in MODES {
        let url = format!(
            "postgres://app@/{}?host={}&port={}&sslmode={mode}&sslrootcert={}\
             &application_name=unix-{mode}",
            s.db.name(),
            s.cluster.dir().display(),
            s.cluster.port(),
            missing.display()
        );
        let m = PostgresLockManager::builder(url.parse().unwrap())
            .holder_id(format!("unix-{mode}"))
            .build()
            .unwrap();
        let guard = m
            .acquire(&format!("unix-held-{mode}"), Some(SECS))
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));

        // A contended wait, dropped: its cancel goes over the socket too.
        let k = format!("unix-contended-{mode}");
        let held = blocker.acquire(&k, None).await.unwrap();
        let m2 = m.clone();
        let k2 = k.clone();
        let waiter = tokio::spawn(async move { m2.acquire(&k2, None).await });
        common::wait_for_waiters(&admin, lock_id_for_key(&k), 1).await;
        waiter.abort();
        eventually_async("the cancelled waiter left the queue", || async {
            common::lock_rows(&admin, lock_id_for_key(&k)).await.1 == 0
        })
        .await;

        // Every session of the manager came over the socket (no client
        // address), without TLS.
        let rows = admin
            .query(
                "SELECT a.client_addr IS NULL, s.ssl FROM pg_stat_activity a \
                 JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
                &[&format!("eventsource/unix-{mode}")],
            )
            .await
            .unwrap();
        assert!(!rows.is_empty(), "{mode}: no session");
        for r in &rows {
            assert!(r.get::<_, bool>(0), "{mode}: a session over TCP");
            assert!(!r.get::<_, bool>(1), "{mode}: TLS on a socket");
        }
        guard.release().await.unwrap();
        held.release().await.unwrap();
        m.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_model_pool_connects_over_a_socket_with_every_sslmode() {
    let s = setup().await;
    let admin = s.db.connect().await.unwrap();
    admin
        .batch_execute(&format!(
            "{} GRANT ALL ON conformance_items TO app;",
            schema::full_schema::<Item>(Dialect::Postgres)
        ))
        .await
        .unwrap();
    for (i, mode) in MODES.into_iter().enumerate() {
        let url = format!(
            "host={} port={} dbname={} user=app sslmode={mode} application_name=rm-unix",
            s.cluster.dir().display(),
            s.cluster.port(),
            s.db.name()
        );
        let pool = PostgresDatabase::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        let repo = pool.repository::<Item>();
        repo.save(&Item::new(format!("over the socket, {mode}")))
            .await
            .unwrap();
        assert_eq!(repo.count(&Query::new()).await.unwrap(), i as u64 + 1);
    }
    let tls_sessions: i64 = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl OR a.client_addr IS NOT NULL) \
             FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
             WHERE a.application_name = 'rm-unix'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tls_sessions, 0);
}

/// A string that names no host connects as libpq does, through a server's
/// socket in a default directory (here `/tmp`, upstream libpq's), and a
/// port with no socket there falls back to `localhost`, which is what its
/// error then names: never an address that was not tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_without_a_host_uses_the_default_socket_directory() {
    use pgcoord::ConnectOptions;
    use tokio_postgres::config::Host;
    let (cluster, db) =
        crate::fault_support::private_db(&[("unix_socket_directories", "/tmp")]).await;
    let url = format!("postgres://postgres@/{}?port={}", db.name(), cluster.port());
    let o: ConnectOptions = url.parse().unwrap();
    assert_eq!(o.config().get_hosts(), &[Host::Unix("/tmp".into())]);
    let m = PostgresLockManager::builder(o)
        .holder_id("no-host")
        .build()
        .unwrap();
    let g = m.acquire("no-host", Some(SECS)).await.unwrap();
    let over_socket: bool = db
        .connect()
        .await
        .unwrap()
        .query_one(
            "SELECT bool_and(client_addr IS NULL) FROM pg_stat_activity \
             WHERE application_name = 'eventsource/no-host'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(over_socket, "a session of the manager came over TCP");
    g.release().await.unwrap();
    m.close().await.unwrap();
    drop(PostgresDatabase::connect(&url).await.unwrap());

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o: ConnectOptions = format!("postgres://postgres@/x?port={closed}")
        .parse()
        .unwrap();
    assert_eq!(o.config().get_hosts(), &[Host::Tcp("localhost".into())]);
    let err = PostgresLockManager::builder(o)
        .build()
        .unwrap()
        .acquire("k", Some(SECS))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("localhost:{closed}")), "{text}");
    assert!(!text.contains("invalid configuration"), "{text}");
    let empty: ConnectOptions = "".parse().unwrap();
    assert!(!empty.config().get_hosts().is_empty());
}
