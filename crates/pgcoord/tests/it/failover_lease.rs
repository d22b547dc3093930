//! A holder in lease mode across a failover in which the old primary is
//! cut off from it but keeps running (a partition, the seconds before a
//! failover manager demotes it): nothing ends its session, the old primary
//! still says it holds the key, and yet its loss signal fires, before that
//! old primary hands the key to a waiter of its own. Meanwhile the standby
//! is promoted and grants the key with a greater token, and the cut-off
//! holder's token is refused there.

use crate::{common, failover_support, fault_support};
use std::sync::Arc;
use std::time::Duration;

use common::lock_rows;
use failover_support::servers::{connect, Promotion, Servers};
use fault_support::{assert_lost, key, private_db};
use pgcoord::{lock_id_for_key, DistributedLock, Error};
use pgcoord::{postgres::fencing, PostgresLockManager};

const SECS: Duration = Duration::from_secs(30);

fn fenced(url: &str, holder: &str) -> PostgresLockManager {
    PostgresLockManager::builder(url.parse().unwrap())
        .holder_id(holder)
        .fencing(true)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_holder_cut_off_from_a_running_old_primary_knows_before_it_hands_the_key_on() {
    let (primary, db) = private_db(&[]).await;
    common::manager(&db, "installer")
        .install_fencing()
        .await
        .unwrap();
    let mut servers = Servers::start(primary.clone()).await;
    let holder = PostgresLockManager::builder(servers.url(db.name()).parse().unwrap())
        .holder_id("lease-holder")
        .fencing(true)
        .lease(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let k = key("lease-failover");
    let id = lock_id_for_key(&k);
    let guard = Arc::new(holder.acquire(&k, Some(SECS)).await.unwrap());
    let token = guard.fence().unwrap();

    // A waiter of the old primary itself: what that server does with the key.
    let on_old = connect(&primary.url(db.name())).await;
    let old_side = fenced(&primary.url(db.name()), "old-side");
    let waiter = {
        let (m, k, guard) = (old_side.clone(), k.clone(), guard.clone());
        tokio::spawn(async move {
            let g = m.acquire(&k, Some(Duration::from_secs(120))).await.unwrap();
            // Read at once: was the cut-off holder already told?
            let holder_knew = guard.is_lost();
            (g, holder_knew)
        })
    };
    common::wait_for_waiters(&on_old, id, 1).await;

    // The holder is cut off (the old primary keeps running, and nothing
    // ends the holder's session there), the standby promoted.
    servers.fail_over(Promotion::CutOff, db.name()).await;
    assert_lost(&guard, "the cut-off holder").await;
    let (old_grant, holder_knew) = tokio::time::timeout(Duration::from_secs(120), waiter)
        .await
        .expect("the old primary hands the key on after a lease")
        .unwrap();
    assert!(
        holder_knew,
        "the old primary handed the key on before the cut-off holder knew"
    );

    // On the promoted standby: a greater token for a new holder, and the
    // cut-off holder's token is refused.
    let fresh = fenced(&servers.url(db.name()), "fresh");
    let g = fresh.acquire(&k, Some(SECS)).await.unwrap();
    assert!(g.fence().unwrap() > token);
    assert!(fencing::epoch_of(g.fence().unwrap()) > fencing::epoch_of(token));
    let mut on_new = connect(&servers.primary.url(db.name())).await;
    assert_eq!(lock_rows(&on_new, id).await, (1, 0));
    let tx = on_new.transaction().await.unwrap();
    match fencing::check_token(&tx, &k, token).await {
        Err(Error::Fenced(e)) => assert_eq!(e.token, token),
        other => panic!("the cut-off holder's token on the new primary: {other:?}"),
    }
    tx.rollback().await.unwrap();
    g.release().await.unwrap();
    old_grant.release().await.unwrap();
    fresh.close().await.unwrap();
    old_side.close().await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), holder.close()).await;
}
