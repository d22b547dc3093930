//! A runner, its event table and a checkpoint watch across a failover to
//! an asynchronous standby that had not received the last hundred events:
//! the new primary hands out positions the old one had already made final,
//! and its checkpoint is lower than the one published before.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::postgres::{
    PostgresCheckpointWatch, PostgresDatabase, PostgresEventTable,
};
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord::PostgresLockManager;
use pgcoord_testkit::locks::eventually_async;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, reach, runner, PgRunner};
use super::support::*;
use crate::failover_support::servers::{connect, Promotion, Servers};
use crate::fault_support::private_db;

/// Events appended after replication is cut: more than the 32 values a
/// sequence logs ahead, so the promoted standby's sequence ends up below
/// the old primary's.
const LOST: i64 = 100;

type RunTask = tokio::task::JoinHandle<pgcoord::Result<pgcoord::readmodels::RunSummary>>;

fn spawn_run(r: &Arc<PgRunner>, locks: &PostgresLockManager, stop: &CancellationToken) -> RunTask {
    let (r, l, s) = (r.clone(), locks.clone(), stop.clone());
    tokio::spawn(async move { r.run(&l, &s).await })
}

/// Appends `n` in a transaction of its own that `commit` ends; returns
/// the position.
async fn append_in(
    feed: &PostgresEventTable<Ev>,
    client: &mut tokio_postgres::Client,
    n: i64,
) -> i64 {
    let tx = client.transaction().await.unwrap();
    let position = feed.append(&tx, &ev(n)).await.unwrap();
    tx.commit().await.unwrap();
    position
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_that_lost_events_none_is_skipped_nor_reported_applied() {
    let (primary, test_db) = private_db(&[]).await;
    let name = test_db.name().to_owned();
    {
        // The tables first, so that the standby's copy has them.
        let direct = PostgresDatabase::connect(&test_db.url()).await.unwrap();
        PostgresEventTable::<Ev>::new(direct.clone(), "events")
            .unwrap()
            .create_table()
            .await
            .unwrap();
        direct.create_schema::<Seen>().await.unwrap();
    }
    let mut servers = Servers::start(primary).await;
    let url = servers.url(&name);
    let db = PostgresDatabase::connect(&url).await.unwrap();
    let feed = PostgresEventTable::<Ev>::new(db.clone(), "events")
        .unwrap()
        .listen();
    let locks = PostgresLockManager::builder(url.parse().unwrap())
        .build()
        .unwrap();
    let watch = PostgresCheckpointWatch::start(&db, "seen");
    let r = runner(&db, &feed, "seen");
    let stop = CancellationToken::new();
    let mut task = spawn_run(&r, &locks, &stop);

    // Three events reach the standby, checkpoint included.
    append_committed(&db, &feed, 1, 3).await;
    reach(&r, &mut task, 3).await;
    let on_primary = connect(&servers.primary.url(&name)).await;
    let lsn: String = on_primary
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    let on_standby = connect(&servers.standby.url(&name)).await;
    eventually_async("the standby replays the first three", || async {
        on_standby
            .query_one(
                "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                &[&lsn],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    })
    .await;
    drop((on_primary, on_standby));

    // A hundred more that only the primary gets: applied, final, watched.
    servers.cut_replication(&name).await;
    append_committed(&db, &feed, 4, 3 + LOST).await;
    reach(&r, &mut task, 3 + LOST).await;
    let seen = watch
        .wait_for(3 + LOST, Some(Duration::from_secs(60)))
        .await;
    assert_eq!(seen.unwrap(), 3 + LOST);

    servers.fail_over(Promotion::Killed, &name).await;
    let ended = task.await.unwrap();
    assert!(
        ended.is_err(),
        "the runner lost its lock with the old primary"
    );

    // The watch reads the new primary's checkpoint, lower than it said.
    eventually_async("the watch reads the new primary's checkpoint", || async {
        watch.checkpoint() == Some(3)
    })
    .await;

    // On the new primary: position p1 taken by a transaction still open,
    // p2 after it committed; both below what the old primary made final.
    let mut writer = connect(&url).await;
    let mut holder = connect(&url).await;
    let open = holder.transaction().await.unwrap();
    let p1 = feed.append(&open, &ev(1_001)).await.unwrap();
    let p2 = append_in(&feed, &mut writer, 1_002).await;
    assert!(
        p1 < p2 && p2 < 3 + LOST,
        "positions {p1}, {p2} handed out again"
    );
    assert_eq!(watch.checkpoint(), Some(3), "no runner has applied {p2}");

    let mut task = spawn_run(&r, &locks, &stop);
    eventually_async(
        "the runner starts again at the new primary's checkpoint",
        || async { r.progress().checkpoint() == Some(3) },
    )
    .await;
    open.commit().await.unwrap();
    reach(&r, &mut task, p2).await;
    let seen = watch.wait_for(p2, Some(Duration::from_secs(60))).await;
    assert_eq!(seen.unwrap(), p2);
    stop.cancel();
    task.await.unwrap().unwrap();

    let order = r.projection().handler().order.lock().unwrap().clone();
    assert_eq!(
        order[order.len() - 2..],
        [1_001, 1_002],
        "after the failover, every event once and in position order"
    );
    let repo = db.repository::<Seen>();
    let mut rows: Vec<i64> = repo
        .find(&Query::new())
        .await
        .unwrap()
        .iter()
        .map(|s| s.position)
        .collect();
    rows.sort_unstable();
    assert_eq!(
        rows,
        [1, 2, 3, 1_001, 1_002],
        "the new primary's read model"
    );
}
