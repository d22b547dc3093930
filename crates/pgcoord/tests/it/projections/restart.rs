//! A database restart under runners (private clusters): segmented runners
//! ride it out and go on, a standby waiting for the projection's lock
//! takes over after it, and connection failures that last stop a runner.

use std::sync::Arc;
use std::time::Duration;

use pgcoord::readmodels::postgres::PostgresCheckpointWatch;
use pgcoord::readmodels::{ProjectionRunner, ReadModelProjection, Segment};
use pgcoord::{lock_id_for_key, PostgresLockManager};
use pgcoord_testkit::pg::{StopMode, TestCluster};
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, reach, setup_on, PgRunner, Setup};
use super::segments::{assert_partition_order, key, manager, segmented, spawn, Task, NAME};
use super::support::*;
use crate::common::wait_for_waiters;
use crate::fault_support::private_db;

async fn blocking(cluster: &Arc<TestCluster>, f: impl FnOnce(&TestCluster) + Send + 'static) {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || f(&c)).await.unwrap();
}

async fn restart(cluster: &Arc<TestCluster>, mode: StopMode) {
    blocking(cluster, move |c| {
        c.stop(mode).unwrap();
        c.start_again().unwrap();
    })
    .await;
}

/// Appends events `from..=to` in one transaction; returns their positions
/// (after a crash restart the sequence skips some: not `n` any more).
async fn append(s: &Setup, from: i64, to: i64) -> Vec<(i64, i64)> {
    let mut client = s.db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let mut written = Vec::new();
    for n in from..=to {
        written.push((n, s.feed.append(&tx, &ev(n)).await.unwrap()));
    }
    tx.commit().await.unwrap();
    written
}

/// Waits for each segment's checkpoint to reach the position of its last
/// event of `written`, failing at once if a runner stops instead.
async fn applied_while_running(s: &Setup, tasks: &mut [Task], written: &[(i64, i64)]) {
    let [a, b] = tasks else { panic!("two runners") };
    let all = async {
        for i in 0..4 {
            let segment = Segment::new(i, 4).unwrap();
            let last = written
                .iter()
                .rev()
                .find(|(n, _)| segment.holds(&key(&ev(*n))));
            if let Some((_, position)) = last {
                let watch = PostgresCheckpointWatch::start(&s.db, &segment.projection_name(NAME));
                let at = watch.wait_for(*position, Some(Duration::from_secs(120)));
                at.await.unwrap();
            }
        }
    };
    tokio::select! {
        () = all => {}
        stopped = a => panic!("runner A stopped: {stopped:?}"),
        stopped = b => panic!("runner B stopped: {stopped:?}"),
    }
}

async fn segmented_runners_survive(mode: StopMode) {
    // A durable server: with the test clusters' synchronous_commit=off, a
    // crash may lose events already committed, which no runner can apply.
    let (cluster, test_db) = private_db(&[("synchronous_commit", "on")]).await;
    let s = setup_on(test_db).await;
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for id in ["seg-a", "seg-b"] {
        let r = Arc::new(segmented(&s.db, &s.feed, 4, 5, Duration::ZERO));
        tasks.push(spawn(&r, &manager(&s, id), &stop));
    }
    let before = append(&s, 1, 40).await;
    applied_while_running(&s, &mut tasks, &before).await;

    restart(&cluster, mode).await;

    // Both runners are still there: they apply what comes after.
    let after = append(&s, 41, 80).await;
    applied_while_running(&s, &mut tasks, &after).await;
    stop.cancel();
    for t in tasks {
        t.await.unwrap().expect("a runner failed");
    }
    let repo = s.db.repository::<Seen>();
    assert_each_applied_once(&repo, 80).await;
    assert_partition_order(&repo).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segmented_runners_ride_out_a_fast_restart() {
    segmented_runners_survive(StopMode::Fast).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segmented_runners_ride_out_an_immediate_restart() {
    segmented_runners_survive(StopMode::Immediate).await;
}

fn pg_runner(s: &Setup) -> Arc<PgRunner> {
    pg_runner_with(s, pgcoord::readmodels::DEFAULT_RECONNECT_PATIENCE)
}

fn pg_runner_with(s: &Setup, patience: Duration) -> Arc<PgRunner> {
    let projection =
        ReadModelProjection::new(Recorder::default(), s.db.repository::<Seen>()).named("seen");
    let runner = ProjectionRunner::new(projection, s.feed.clone()).batch_size(4);
    Arc::new(runner.reconnect_patience(patience))
}

fn locks(s: &Setup, id: &str) -> PostgresLockManager {
    crate::common::manager(&s.test_db, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_waiting_for_the_lock_takes_over_after_a_restart() {
    let (cluster, test_db) = private_db(&[]).await;
    let s = setup_on(test_db).await;
    let stop = CancellationToken::new();
    let (first, standby) = (pg_runner(&s), pg_runner(&s));
    let mut first_task = tokio::spawn({
        let (r, l, st) = (first.clone(), locks(&s, "first"), stop.clone());
        async move { r.run(&l, &st).await }
    });
    append_committed(&s.db, &s.feed, 1, 10).await;
    reach(&first, &mut first_task, 10).await;
    let mut standby_task = tokio::spawn({
        let (r, l, st) = (standby.clone(), locks(&s, "standby"), stop.clone());
        async move { r.run(&l, &st).await }
    });
    let client = s.test_db.connect().await.unwrap();
    wait_for_waiters(&client, lock_id_for_key("projection:seen"), 1).await;
    drop(client);

    restart(&cluster, StopMode::Fast).await;

    // The runner that held the lock lost it, as documented.
    let lost = first_task.await.unwrap().unwrap_err();
    assert!(lost.is_lock_lost(), "{lost:?}");
    // The standby went on waiting through the restart and takes over.
    append_committed(&s.db, &s.feed, 11, 20).await;
    reach(&standby, &mut standby_task, 20).await;
    stop.cancel();
    let summary = standby_task.await.unwrap().unwrap();
    assert_eq!(summary.checkpoint, Some(20));
    assert_each_applied_once(&s.db.repository::<Seen>(), 20).await;
}

/// The patience is a bound: with the server down for good, a standby and a
/// segmented runner stop with the connection failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_failures_that_last_stop_the_runners() {
    let (cluster, test_db) = private_db(&[]).await;
    let s = setup_on(test_db).await;
    let stop = CancellationToken::new();
    let holder = locks(&s, "holder");
    let held = pgcoord::DistributedLock::acquire(&holder, "projection:seen", None)
        .await
        .unwrap();
    let patience = Duration::from_millis(300);
    let standby = pg_runner_with(&s, patience);
    let standby_task = tokio::spawn({
        let (l, st) = (locks(&s, "standby"), stop.clone());
        async move { standby.run(&l, &st).await }
    });
    let client = s.test_db.connect().await.unwrap();
    wait_for_waiters(&client, lock_id_for_key("projection:seen"), 1).await;
    drop(client);
    let seg =
        Arc::new(segmented(&s.db, &s.feed, 2, 5, Duration::ZERO).reconnect_patience(patience));
    let seg_task = spawn(&seg, &manager(&s, "seg"), &stop);

    blocking(&cluster, |c| c.stop(StopMode::Fast).unwrap()).await;

    for (what, result) in [
        ("standby", standby_task.await.unwrap().map(|_| ())),
        ("segmented", seg_task.await.unwrap().map(|_| ())),
    ] {
        let e = result.expect_err(what);
        assert!(e.as_backend().is_some(), "{what}: {e:?}");
        assert!(!e.is_lock_lost(), "{what}: {e:?}");
    }
    assert!(held.is_lost());
}
