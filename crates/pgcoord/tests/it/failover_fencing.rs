//! Fencing tokens across a failover to a real streaming standby that is
//! promoted: a token handed out on the new primary is greater than every
//! token handed out before, whether replication had lost the last
//! increments or only lagged, and every pre-failover token is refused on
//! the new primary, by `fencing::check` and by the SQL check functions.

use crate::common;
use crate::fault_support;

use std::sync::Arc;
use std::time::Duration;

use common::connect;
use pgcoord::coordination::Election;
use pgcoord::{lock_id_for_key, DistributedLock, Error};
use pgcoord::{postgres::fencing, PostgresLockManager};
use pgcoord_testkit::locks::eventually_async;
use pgcoord_testkit::pg::{StopMode, TestCluster};

const SECS: Duration = Duration::from_secs(30);

fn fenced(url: &str) -> PostgresLockManager {
    PostgresLockManager::builder(url.parse().unwrap())
        .fencing(true)
        .build()
        .unwrap()
}

/// Three fenced grants of `key` (each released): their tokens.
async fn grant_three(m: &PostgresLockManager, key: &str) -> Vec<u64> {
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let g = m.acquire(key, Some(SECS)).await.unwrap();
        tokens.push(g.fence().unwrap());
        g.release().await.unwrap();
    }
    tokens
}

/// The fence row of `key` as `client`'s server has it.
async fn fence_row(client: &tokio_postgres::Client, key: &str) -> Option<i64> {
    client
        .query_opt(
            "SELECT fence FROM eventsource_lock_fences WHERE lock_id = $1",
            &[&lock_id_for_key(key)],
        )
        .await
        .ok()
        .flatten()
        .map(|r| r.get(0))
}

enum Replication {
    /// The standby's WAL receiver is stopped: the last grants are lost.
    Cut,
    /// The standby receives but replays an hour late.
    Lagging,
}

struct Failover {
    /// The promoted standby, now the primary.
    new_primary: Arc<TestCluster>,
    new_url: String,
    /// Every token handed out before the failover, in order.
    before: Vec<u64>,
    /// The terms of the elections won before the failover.
    terms_before: Vec<u64>,
}

/// A primary with a streaming standby; three fenced grants replicated,
/// then replication cut or lagging, three more grants and a won election;
/// then the primary dies and the standby is promoted.
async fn fail_over(replication: Replication, key: &str) -> Failover {
    let (primary, db) = fault_support::private_db(&[]).await;
    let old_url = primary.url(db.name());
    let m = fenced(&old_url);
    m.install_fencing().await.unwrap();
    let p = primary.clone();
    let standby = Arc::new(
        tokio::task::spawn_blocking(move || p.start_standby())
            .await
            .unwrap()
            .expect("a standby"),
    );
    let new_url = standby.url(db.name());
    let mut before = grant_three(&m, key).await;
    let replicated = *before.last().unwrap() as i64;
    let on_standby = connect(&new_url).await;
    eventually_async("the standby replays the first grants", || async {
        fence_row(&on_standby, key).await == Some(replicated)
    })
    .await;
    // The setting that stops (or delays) the standby, and the signal that
    // it took effect.
    let (setting, took_effect) = match replication {
        Replication::Cut => (
            "primary_conninfo = ''",
            "SELECT count(*) = 0 FROM pg_stat_wal_receiver",
        ),
        Replication::Lagging => (
            "recovery_min_apply_delay = '1h'",
            "SELECT current_setting('recovery_min_apply_delay') = '1h'",
        ),
    };
    // ALTER SYSTEM cannot run inside the implicit transaction of a
    // multi-statement query: two calls.
    let alter = format!("ALTER SYSTEM SET {setting}");
    on_standby.batch_execute(&alter).await.unwrap();
    on_standby
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    eventually_async("the standby applies the setting", || async {
        on_standby
            .query_one(took_effect, &[])
            .await
            .unwrap()
            .get::<_, bool>(0)
    })
    .await;
    before.extend(grant_three(&m, key).await);
    let election = Election::new(m.clone(), "failover").expect("a fencing lock manager");
    let mut terms_before = Vec::new();
    for _ in 0..2 {
        let leadership = election.campaign(Some(SECS)).await.unwrap();
        terms_before.push(leadership.term());
        leadership.resign().await.unwrap();
    }
    drop(on_standby);
    let _ = m.close().await;
    // The primary dies; the standby takes over.
    let p = primary.clone();
    tokio::task::spawn_blocking(move || p.stop(StopMode::Immediate))
        .await
        .unwrap()
        .expect("the primary stops");
    let s = standby.clone();
    tokio::task::spawn_blocking(move || s.promote())
        .await
        .unwrap()
        .expect("the standby is promoted");
    Failover {
        new_primary: standby,
        new_url,
        before,
        terms_before,
    }
}

async fn assert_tokens_never_repeat(replication: Replication) {
    let key = fault_support::key("failover");
    let f = fail_over(replication, &key).await;
    let _keep = &f.new_primary;
    let mut client = connect(&f.new_url).await;
    let in_recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!in_recovery, "the promoted standby accepts writes");

    // Before any grant on the new primary, every pre-failover token is
    // refused, including the one the row still shows.
    for &token in &f.before {
        let tx = client.transaction().await.unwrap();
        match fencing::check_token(&tx, &key, token).await {
            Err(Error::Fenced(e)) => assert_eq!(e.token, token),
            other => panic!("token {token} from before the failover: {other:?}"),
        }
        tx.rollback().await.unwrap();
        let err = client
            .query_one(
                "SELECT eventsource_lock_fence_check_key($1, $2)",
                &[&key, &(token as i64)],
            )
            .await
            .expect_err("the SQL check refuses it too");
        assert_eq!(err.code().map(|c| c.code()), Some(fencing::FENCED_SQLSTATE));
    }

    // New grants: greater than everything handed out before, strictly
    // increasing, and accepted.
    let m = fenced(&f.new_url);
    let after = grant_three(&m, &key).await;
    let highest_before = *f.before.iter().max().unwrap();
    assert!(
        after[0] > highest_before && after.windows(2).all(|w| w[0] < w[1]),
        "before {:?}, after {after:?}",
        f.before
    );
    assert!(fencing::epoch_of(after[0]) > fencing::epoch_of(highest_before));
    let g = m.acquire(&key, Some(SECS)).await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert_eq!(
        fencing::check(&tx, g.info()).await.unwrap(),
        g.fence().unwrap()
    );
    tx.commit().await.unwrap();
    g.release().await.unwrap();

    // Election terms keep rising across the promotion.
    let election = Election::new(m.clone(), "failover").expect("a fencing lock manager");
    let leadership = election.campaign(Some(SECS)).await.unwrap();
    let highest_term = *f.terms_before.iter().max().unwrap();
    assert!(
        leadership.term() > highest_term,
        "term {} after terms {:?}",
        leadership.term(),
        f.terms_before
    );
    leadership.resign().await.unwrap();
    m.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_repeat_when_the_promotion_lost_the_last_grants() {
    assert_tokens_never_repeat(Replication::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_repeat_when_the_standby_only_lagged() {
    assert_tokens_never_repeat(Replication::Lagging).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_privileges_gets_tokens_through_the_installed_functions() {
    let (primary, db) = fault_support::private_db(&[]).await;
    let admin_url = primary.url(db.name());
    let admin = connect(&admin_url).await;
    fenced(&admin_url).install_fencing().await.unwrap();
    admin
        .batch_execute(
            "CREATE ROLE locker LOGIN; \
             REVOKE EXECUTE ON FUNCTION pg_catalog.pg_walfile_name(pg_lsn) FROM PUBLIC; \
             REVOKE EXECUTE ON FUNCTION pg_catalog.pg_current_wal_lsn() FROM PUBLIC; \
             GRANT SELECT, INSERT, UPDATE ON eventsource_lock_fences TO locker",
        )
        .await
        .unwrap();
    let locker_url = format!(
        "postgres://locker@127.0.0.1:{}/{}",
        primary.port(),
        db.name()
    );
    let m = fenced(&locker_url);
    let tokens = grant_three(&m, "no-privileges").await;
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(fencing::epoch_of(tokens[0]), 1, "timeline 1: {tokens:?}");
    m.close().await.unwrap();
}
