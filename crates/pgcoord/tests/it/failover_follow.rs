//! A manager given both servers (`host=primary,standby`,
//! `target_session_attrs=read-write`) follows a failover: its holders and
//! its leader are told the moment the primary dies, nothing is taken while
//! no server accepts writes, and once the standby is promoted the same
//! manager locks there, with tokens and terms above every earlier one.

use crate::common;
use crate::fault_support;

use std::sync::Arc;
use std::time::Duration;

use common::{connect, lock_rows};
use fault_support::{assert_lost, key, private_db};
use pgcoord::coordination::Election;
use pgcoord::PostgresLockManager;
use pgcoord::{lock_id_for_key, DistributedLock};
use pgcoord_testkit::locks::eventually_async;
use pgcoord_testkit::pg::StopMode;

const SECS: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_and_its_election_follow_the_promoted_standby() {
    let (primary, db) = private_db(&[]).await;
    let p = primary.clone();
    let standby = Arc::new(
        tokio::task::spawn_blocking(move || p.start_standby())
            .await
            .unwrap()
            .expect("a standby"),
    );
    let both = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
        primary.port(),
        standby.port(),
        db.name()
    );
    let m = PostgresLockManager::builder(both.parse().unwrap())
        .holder_id("follower")
        .fencing(true)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    m.install_fencing().await.unwrap();
    let on_standby = connect(&standby.url(db.name())).await;
    eventually_async("the standby replays the install", || async {
        on_standby
            .query_one(
                "SELECT to_regclass('eventsource_lock_fences') IS NOT NULL",
                &[],
            )
            .await
            .is_ok_and(|r| r.get::<_, bool>(0))
    })
    .await;

    let k = key("follow");
    let guard = m.acquire(&k, Some(SECS)).await.unwrap();
    let token_before = guard.fence().unwrap();
    let election = Election::new(m.clone(), "follow").expect("a fencing lock manager");
    let leader = election.campaign(Some(SECS)).await.unwrap();
    let term_before = leader.term();

    // The primary dies: every holder and the leader are told.
    let stopping = primary.clone();
    tokio::task::spawn_blocking(move || stopping.stop(StopMode::Immediate))
        .await
        .unwrap()
        .unwrap();
    assert_lost(&guard, "the lock on the dead primary").await;
    tokio::time::timeout(SECS, leader.lost())
        .await
        .expect("the leader is told it lost office");

    // No server accepts writes: nothing is taken on the standby.
    let err = m
        .acquire(&k, Some(Duration::from_millis(200)))
        .await
        .expect_err("no primary, no lock");
    assert!(!err.is_timeout(), "not a held key: {err}");
    assert_eq!(lock_rows(&on_standby, lock_id_for_key(&k)).await, (0, 0));

    // The standby is promoted: the same manager locks there.
    let s = standby.clone();
    tokio::task::spawn_blocking(move || s.promote())
        .await
        .unwrap()
        .expect("promoted");
    let after = m.acquire(&k, Some(SECS)).await.unwrap();
    assert!(after.fence().unwrap() > token_before);
    let promoted = connect(&standby.url(db.name())).await;
    assert_eq!(lock_rows(&promoted, lock_id_for_key(&k)).await, (1, 0));
    let leader = election.campaign(Some(SECS)).await.unwrap();
    assert!(leader.term() > term_before);
    leader.resign().await.unwrap();
    after.release().await.unwrap();
    drop(guard);
    m.close().await.unwrap();
}
