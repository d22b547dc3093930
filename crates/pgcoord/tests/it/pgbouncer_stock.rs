//! The lock manager and `verify()` behind a real PgBouncer in its stock
//! configuration (nothing set but addresses, authentication and
//! `pool_mode`): in session mode, the mode the README supports, everything
//! works and `verify()` passes; in transaction mode, `verify()` says why
//! session locks are unsafe there.
//!
//! Skipped without the `pgbouncer` binary unless
//! `EVENTSOURCE_REQUIRE_PGBOUNCER=1` (CI sets it).

use crate::common;
use crate::fault_support;

use std::time::Duration;

use pgcoord::{error::BackendErrorKind, DistributedLock, LockRegistry, SharedLock};
use pgcoord::{postgres::VerifyProblem, PostgresLockManager};
use pgcoord_testkit::locks::eventually_async;
use pgcoord_testkit::pgbouncer::{pgbouncer_or_skip, Bouncer};

const SECS: Duration = Duration::from_secs(30);

/// A private cluster, a database on it and a stock PgBouncer in front.
pub(crate) async fn behind_pgbouncer(
    pool_mode: &str,
) -> Option<(Bouncer, String, pgcoord_testkit::pg::TestDatabase)> {
    behind_pgbouncer_with(pool_mode, "").await
}

/// [`behind_pgbouncer`] with `settings` added to PgBouncer's own.
async fn behind_pgbouncer_with(
    pool_mode: &str,
    settings: &str,
) -> Option<(Bouncer, String, pgcoord_testkit::pg::TestDatabase)> {
    let bin = pgbouncer_or_skip()?;
    let (cluster, db) = fault_support::private_db(&[]).await;
    let bouncer = Bouncer::start_with(&bin, cluster.port(), pool_mode, settings).unwrap();
    let url = format!("{}?sslmode=disable", bouncer.url(db.name()));
    let config: tokio_postgres::Config = url.parse().unwrap();
    eventually_async("pgbouncer accepts connections", || {
        let config = config.clone();
        async move {
            let connect = config.connect(tokio_postgres::NoTls);
            match tokio::time::timeout(Duration::from_secs(2), connect).await {
                Ok(Ok((client, conn))) => {
                    tokio::spawn(conn);
                    client.simple_query("SELECT 1").await.is_ok()
                }
                _ => false,
            }
        }
    })
    .await;
    drop(cluster); // the database keeps it alive
    Some((bouncer, url, db))
}

/// A lock manager through the pooler at `url`, as `holder`.
pub(crate) fn manager_via(url: &str, holder: &str) -> PostgresLockManager {
    url.parse()
        .map(PostgresLockManager::builder)
        .unwrap()
        .holder_id(holder)
        .build()
        .unwrap()
}

/// How many server processes hold `key` (granted, exclusive or shared).
async fn server_holders(direct: &tokio_postgres::Client, key: &str) -> i64 {
    direct
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&pgcoord::lock_id_for_key(key)],
        )
        .await
        .unwrap()
        .get(0)
}

/// A client of the pooler at `url` in a transaction it keeps open: in
/// transaction mode it takes the pool's most recently used idle server
/// connection until its `COMMIT`, so the next statement of anyone else goes
/// to another one.
async fn in_open_transaction(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client.simple_query("BEGIN; SELECT 1").await.unwrap();
    client
}

/// `verify()`'s failure: the error, which must name a server that cannot
/// give safe session locks, and the problem it carries.
async fn verify_fails(m: &PostgresLockManager) -> (pgcoord::Error, VerifyProblem) {
    let err = m.verify().await.unwrap_err();
    let backend = err.as_backend().expect("backend error");
    assert_eq!(backend.kind(), BackendErrorKind::NotPostgres, "{err:?}");
    let problem = std::error::Error::source(backend)
        .and_then(|s| s.downcast_ref::<VerifyProblem>())
        .expect("a VerifyProblem source")
        .clone();
    (err, problem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_pgbouncer_in_session_mode_locks_waits_and_verifies() {
    let Some((bouncer, url, db)) = behind_pgbouncer("session").await else {
        return;
    };
    let direct = db.connect().await.unwrap();
    let a = manager_via(&url, "via-bouncer-a");
    let b = manager_via(&url, "via-bouncer-b");
    let key = format!("bouncer:{}", uuid::Uuid::new_v4());
    let g = a
        .acquire(&key, Some(SECS))
        .await
        .unwrap_or_else(|e| panic!("{e}\npgbouncer log:\n{}", bouncer.log()));
    assert!(
        b.try_lock(&key)
            .await
            .map(|g| g.map(pgcoord::LockGuard::into_manual))
            .unwrap()
            .is_none(),
        "not excluded"
    );
    // A contended wait queues in PostgreSQL through the pooler.
    let b2 = b.clone();
    let k = key.clone();
    let waiter = tokio::spawn(async move { b2.acquire(&k, Some(SECS)).await });
    common::wait_for_waiters(&direct, pgcoord::lock_id_for_key(&key), 1).await;
    g.release().await.unwrap();
    waiter.await.unwrap().unwrap().release().await.unwrap();
    // Shared holds, each on a pooled session of its own, share the key and
    // keep writers out.
    let readers = [
        a.acquire_shared(&key, Some(SECS)).await.unwrap(),
        a.acquire_shared(&key, Some(SECS)).await.unwrap(),
        b.acquire_shared(&key, Some(SECS)).await.unwrap(),
    ];
    let shared: i64 = direct
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND mode = 'ShareLock' AND ((classid::int8 << 32) | objid::int8) = $1",
            &[&pgcoord::lock_id_for_key(&key)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(shared, 3, "three shared holds through the pooler");
    assert!(
        b.try_lock(&key).await.unwrap().is_none(),
        "a writer passed readers"
    );
    for r in readers {
        r.release().await.unwrap();
    }
    // The session settings were applied with SET, not dropped by the pooler.
    let row = direct
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'eventsource/via-bouncer-%'",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, i64>(0) >= 1, "sessions not seen by the server");
    let report = a.verify().await.unwrap();
    // It passes, and says what is in between: the TCP settings shown are
    // the server's toward the pooler.
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("a pooler or proxy is in between")),
        "{:?}",
        report.warnings
    );
    assert_eq!(a.close().await.unwrap() + b.close().await.unwrap(), 0);
}

/// A session pool with one server connection serves one client at a time:
/// `verify()`'s second connection is queued by the pooler (up to its
/// `query_wait_timeout`, 120 s), and the check says so instead of waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_pool_of_one_server_connection_is_named_by_verify() {
    let Some((bouncer, url, _db)) = behind_pgbouncer_with("session", "default_pool_size = 1").await
    else {
        return;
    };
    let m = manager_via(&url, "verify");
    let (err, problem) = verify_fails(&m).await;
    assert!(
        matches!(problem, VerifyProblem::NotServed { connection: 2, .. }),
        "{problem:?}"
    );
    assert!(err.to_string().contains("default_pool_size"), "{err}");
    // The first connection is given back: the pool serves the next client.
    let again = url
        .parse()
        .and_then(|o| PostgresLockManager::builder(o).build())
        .unwrap();
    let guard = again
        .try_lock("after-verify")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", bouncer.log()));
    assert!(
        guard.is_some(),
        "the pool's one server connection stayed taken"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_pgbouncer_in_transaction_mode_is_caught_by_verify() {
    let Some((_bouncer, url, db)) = behind_pgbouncer("transaction").await else {
        return;
    };
    let direct = db.connect().await.unwrap();
    let advisory = || async {
        direct
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
                &[],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    // The first check meets fresh server sessions; the later ones meet
    // server sessions that served earlier clients' prepared statements
    // (42P05), which must name the pooler too, not read as a server that
    // cannot be reached.
    for _ in 0..3 {
        let warm = url
            .parse()
            .and_then(|o| PostgresLockManager::builder(o).build())
            .unwrap();
        let err = warm.verify().await.unwrap_err();
        assert_eq!(
            err.as_backend().map(|b| b.kind()),
            Some(BackendErrorKind::NotPostgres),
            "{err:?}"
        );
        // Its test key is not left held on the server sessions the pooler
        // keeps for its next clients (it was, until the pooler closed them).
        eventually_async("verify() gives its test lock back", || async {
            advisory().await == 0
        })
        .await;
    }
    let m = manager_via(&url, "verify");
    let (err, problem) = verify_fails(&m).await;
    assert!(
        matches!(
            problem,
            VerifyProblem::SessionNotKept { .. }
                | VerifyProblem::SharedBackend { .. }
                | VerifyProblem::PreparedStatementLost
        ),
        "{problem:?}"
    );
    assert!(err.to_string().contains("pool"), "{err}");
    assert_eq!(m.held_lock_count(), 0);
}

/// Behind a pooler in transaction mode, a lock session's statements land
/// on any server connection, so two managers could each be granted one
/// key by the same server process. Each session claims its connection
/// when it opens, and its lock statements run only there: a second
/// manager is refused (the pooler named) or excluded by the server, never
/// granted the key while the first holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_pgbouncer_in_transaction_mode_never_grants_one_key_twice() {
    let Some((bouncer, url, db)) = behind_pgbouncer("transaction").await else {
        return;
    };
    let direct = db.connect().await.unwrap();
    let manager = |holder: String| manager_via(&url, &holder);
    let key = format!("bouncer-tx:{}", uuid::Uuid::new_v4());
    let first = manager("tx-first".into());
    let held = match first.acquire(&key, Some(SECS)).await {
        Ok(g) => Some(g),
        Err(e) => {
            // Refused outright is fine too, as long as it names the pooler.
            assert!(e.to_string().contains("pooler"), "{e}");
            None
        }
    };
    let mut refused = 0;
    for i in 0..8 {
        let other = manager(format!("tx-other-{i}"));
        match other.try_lock(&key).await {
            Ok(Some(_)) if held.is_some() => {
                panic!(
                    "a second manager was granted a key the first holds\n{}",
                    bouncer.log()
                )
            }
            Ok(_) => {}
            Err(e) => {
                let backend = e.as_backend().expect("a backend error");
                assert_eq!(backend.kind(), BackendErrorKind::NotPostgres, "{e:?}");
                assert!(e.to_string().contains("session mode"), "{e}");
                refused += 1;
            }
        }
        other.close().await.ok();
    }
    // A manager whose statements can only land on the first one's server
    // process, behind this pooler, is the common case: it is refused.
    assert!(
        refused > 0 || held.is_none(),
        "never refused behind a transaction pooler"
    );
    // Whatever was granted is the first manager's alone on the server.
    let holders = server_holders(&direct, &key).await;
    assert!(holders <= 1, "{holders} server processes hold the key");
    drop(held);
    first.close().await.ok();
}

/// Behind a pooler in transaction mode, a release whose unlock the pooler
/// sends to another server connection gives nothing back there: the lock
/// stays on the connection it was granted on. The release says so (the
/// pooler named), rather than that the lock was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_the_pooler_sends_elsewhere_names_the_pooler_not_a_loss() {
    let Some((bouncer, url, db)) = behind_pgbouncer("transaction").await else {
        return;
    };
    let direct = db.connect().await.unwrap();
    let m = manager_via(&url, "tx-release");
    let key = format!("bouncer-tx-release:{}", uuid::Uuid::new_v4());
    let guard = m
        .try_lock(&key)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", bouncer.log()))
        .expect("a free key");
    // Another client takes the pool's idle server connection, the one the
    // lock was granted on, in a transaction it keeps open: the release's
    // unlock must go to another one.
    let other = in_open_transaction(&url).await;
    let err = guard.release().await.unwrap_err();
    assert!(!err.is_lock_lost(), "reported as lost: {err:?}");
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(backend.kind(), BackendErrorKind::NotPostgres, "{err:?}");
    assert!(err.to_string().contains("session mode"), "{err}");
    // Still held on the server, as the error says it may be.
    let held = server_holders(&direct, &key).await;
    assert_eq!(held, 1);
    other.simple_query("COMMIT").await.unwrap();
}

/// A session pool told not to reset its server connections between
/// clients (`server_reset_query =`, on purpose) hands the next client the
/// last one's session; the refusal names that setting, not only the
/// transaction mode it used to blame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_pool_without_a_reset_is_refused_naming_the_reset() {
    let Some((bouncer, url, _db)) =
        behind_pgbouncer_with("session", "server_reset_query =\ndefault_pool_size = 1").await
    else {
        return;
    };
    let first = manager_via(&url, "no-reset-1");
    let guard = first
        .try_lock("no-reset")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", bouncer.log()));
    guard.expect("free").release().await.unwrap();
    first.close().await.unwrap();
    let second = manager_via(&url, "no-reset-2");
    let err = second.try_lock("no-reset").await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("server_reset_query") && text.contains("transaction or statement mode"),
        "{text}"
    );
    second.close().await.unwrap();
}

/// A lone holder behind a pooler in transaction mode, whose liveness check
/// the pooler sends to another server connection: its loss names the
/// pooler, not a server that stopped answering (a probe saw "liveness
/// check got no answer in time").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_the_pooler_sends_elsewhere_is_a_loss_that_names_the_pooler() {
    let Some((bouncer, url, _db)) = behind_pgbouncer("transaction").await else {
        return;
    };
    let m = url
        .parse()
        .map(PostgresLockManager::builder)
        .unwrap()
        .holder_id("tx-ping")
        .liveness_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let key = format!("bouncer-tx-ping:{}", uuid::Uuid::new_v4());
    let guard = m
        .try_lock(&key)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", bouncer.log()))
        .expect("a free key");
    // Another client takes the server connection the lock lives on, in a
    // transaction it keeps open: the next ping goes to another one.
    let other = in_open_transaction(&url).await;
    tokio::time::timeout(SECS, guard.lost())
        .await
        .expect("the loss is noticed");
    let why = guard.loss_signal().reason().expect("a reason");
    assert!(
        why.contains("reached another server connection") && !why.contains("did not answer"),
        "{why}"
    );
    other.simple_query("COMMIT").await.unwrap();
    drop(guard);
    m.close().await.ok();
}
