//! The event table's feed over gaps wider than a batch: positions that a
//! rolled-back transaction took never hold the runner back, even once the
//! feed knows them to be final.

use pgcoord::readmodels::EventFeed;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, reach, runner, setup_on};
use super::support::*;
use crate::fault_support::private_db;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_stretch_wider_than_a_batch_does_not_stall_the_runner() {
    // A cluster of its own: no other test's transaction holds the feed's
    // watermark back, so the read below makes the gap final.
    let (_cluster, test_db) = private_db(&[]).await;
    let s = setup_on(test_db).await;
    let r = runner(&s.db, &s.feed, "seen"); // batches of 4, woken by LISTEN only
    let stop = CancellationToken::new();
    let mut task = tokio::spawn({
        let (r, locks, stop) = (r.clone(), s.locks.clone(), stop.clone());
        async move { r.run(&locks, &stop).await }
    });
    append_committed(&s.db, &s.feed, 1, 3).await;
    reach(&r, &mut task, 3).await;

    // Positions 4 to 13 are taken and rolled back: a gap of ten.
    let mut client = s.db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    for n in 4..=13 {
        assert_eq!(s.feed.append(&tx, &ev(n)).await.unwrap(), n);
    }
    tx.rollback().await.unwrap();
    drop(client);
    // A read (the runner's feed shares this watermark) finds the gap final
    // and empty.
    assert!(s.feed.read_after(Some(3), 4).await.unwrap().is_empty());

    append_committed(&s.db, &s.feed, 14, 15).await;
    reach(&r, &mut task, 15).await;
    stop.cancel();
    let summary = task.await.unwrap().unwrap();
    assert_eq!((summary.applied, summary.checkpoint), (5, Some(15)));
    let order = r.projection().handler().order.lock().unwrap().clone();
    assert_eq!(order, [1, 2, 3, 14, 15]);
    let read = s.feed.read_after(Some(3), 4).await.unwrap();
    assert_eq!(read, vec![(14, ev(14)), (15, ev(15))]);
}
