//! A manager given two hosts when the first one is frozen: it accepts TCP
//! connections (its kernel completes the handshake, as for a SIGSTOPped
//! server or a paused VM) but never answers. libpq gives each host its own
//! `connect_timeout` and moves on to the next; a manager should too, or it
//! can never reach the promoted standby behind a frozen old primary.

use crate::{failover_support, fault_support};
use std::time::Duration;

use failover_support::relay::Relay;
use fault_support::{key, private_db};
use pgcoord::DistributedLock;
use pgcoord::PostgresLockManager;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_first_host_does_not_keep_the_manager_from_the_second() {
    let (cluster, db) = private_db(&[]).await;
    let frozen = Relay::start(cluster.port()).await;
    frozen.point_to(None); // accepts, reads, never answers
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=read-write",
        frozen.port,
        cluster.port(),
        db.name()
    );
    let m = PostgresLockManager::builder(url.parse().unwrap())
        .holder_id("two-hosts")
        .connect_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let k = key("frozen-first-host");
    let mut last = None;
    for _ in 0..5 {
        match m.acquire(&k, Some(Duration::from_secs(5))).await {
            Ok(g) => {
                g.release().await.unwrap();
                m.close().await.unwrap();
                return;
            }
            Err(e) => last = Some(e),
        }
    }
    panic!("never reached the second host: {:?}", last.unwrap());
}
