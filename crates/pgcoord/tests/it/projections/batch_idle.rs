//! A frozen runner's (or rebuild's) batch transaction is ended by the
//! server once it has sat idle longer than its batch idle timeout, so the
//! runner that took the lock over, or the live runner beside the rebuild,
//! is not held back by it (an event-table feed waits for every older open
//! transaction) and nothing is applied twice.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pgcoord::readmodels::postgres::{PostgresDatabase, PostgresEventTable};
use pgcoord::readmodels::{ProjectionRebuild, ReadModelProjection};
use pgcoord::readmodels::{ProjectionRunner, ReadModelHandler, ReadModelMeta, ReadModelRepository};
use pgcoord::PostgresLockManager;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::postgres::{append_committed, runner, setup};
use super::rebuild::{marked, reach_live, spawn_live, texts};
use super::rebuild_support::{live_runner, Marked};
use super::support::*;

/// Writes each event's row; at event `at` (once) says so on `frozen`, then
/// blocks its thread until `thaw` says go: the runner's whole runtime stops
/// there with its batch transaction open, as under SIGSTOP.
struct Freezing {
    at: i64,
    frozen: Mutex<Option<oneshot::Sender<()>>>,
    thaw: Mutex<mpsc::Receiver<()>>,
}

impl ReadModelHandler for Freezing {
    type Model = Seen;
    type Event = Ev;

    async fn handle<R: ReadModelRepository<Seen>>(&self, e: &Ev, repo: &R) -> pgcoord::Result<()> {
        let row = Seen {
            meta: ReadModelMeta::new(id_of(e.n)),
            position: e.n,
            text: e.text.clone(),
        };
        repo.save(&row).await?;
        if e.n == self.at {
            let said = self.frozen.lock().unwrap().take();
            if let Some(said) = said {
                let _ = said.send(());
                let _ = self.thaw.lock().unwrap().recv();
            }
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_runners_batch_is_ended_and_the_next_runner_goes_on() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 10).await;
    let (frozen_tx, frozen) = oneshot::channel();
    let (thaw, thaw_rx) = mpsc::channel();
    let handler = Freezing {
        at: 3,
        frozen: Mutex::new(Some(frozen_tx)),
        thaw: Mutex::new(thaw_rx),
    };
    let (url, options) = (s.test_db.url(), s.test_db.config().into());
    // Runner A on a runtime of its own, so that the handler freezes all of
    // it: its lock session's pings stop too and the lease ends it.
    let a = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let db = PostgresDatabase::connect(&url).await.unwrap();
            let feed = PostgresEventTable::<Ev>::new(db.clone(), "events").unwrap();
            let locks = PostgresLockManager::builder(options)
                .holder_id("frozen")
                .lease(Duration::from_secs(1))
                .build()
                .unwrap();
            let projection =
                pgcoord::readmodels::ReadModelProjection::new(handler, db.repository::<Seen>())
                    .named("seen");
            let runner = ProjectionRunner::new(projection, feed)
                .batch_size(10)
                .batch_idle_timeout(Some(Duration::from_millis(200)));
            runner.run(&locks, &CancellationToken::new()).await
        })
    });
    frozen
        .await
        .expect("runner A reached the event it freezes at");

    // Runner B waits for the lock, takes it when A's lease ends, and must
    // then get every event from its feed: A's open batch would hold the
    // feed back for as long as A stays frozen.
    let b = runner(&s.db, &s.feed, "seen");
    let progress = b.progress();
    let stop = CancellationToken::new();
    let b_task = tokio::spawn({
        let (b, locks, stop) = (b.clone(), s.locks.clone(), stop.clone());
        async move { b.run(&locks, &stop).await }
    });
    let reached = progress.wait_for(10, Some(Duration::from_secs(60))).await;
    thaw.send(()).unwrap();
    let a_result = tokio::task::spawn_blocking(move || a.join().unwrap())
        .await
        .unwrap();
    reached.expect("the runner that took over applies every event while A is frozen");
    let e = a_result.expect_err("the frozen runner's batch did not commit");
    assert!(
        e.is_lock_lost() || e.to_string().contains("batch_idle_timeout"),
        "A stops on its lost lock or its ended batch: {e}"
    );
    stop.cancel();
    let done = b_task.await.unwrap().unwrap();
    assert_eq!(done.applied, 10, "B applied all ten: {done:?}");
    assert_each_applied_once(&s.db.repository::<Seen>(), 10).await;
}

/// A rebuild whose batch stalls in its handler (its transaction open, with
/// rows written) would hold back the live runner's feed for as long as it
/// stays so; the server ends it after the rebuild's bound and the live
/// runner applies what comes meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_rebuild_batch_is_ended_and_the_live_runner_goes_on() {
    let s = setup().await;
    append_committed(&s.db, &s.feed, 1, 8).await;
    let live = live_runner(&s.db, &s.feed);
    let stop = CancellationToken::new();
    let mut live_task = spawn_live(&s.locks, &live, &stop);
    reach_live(&live, &mut live_task, 8).await;

    let (handler, stalled) = Marked::stalling_at("rebuilt", 3);
    let projection = ReadModelProjection::new(handler, s.db.repository::<Seen>()).named("seen");
    let rebuild = Arc::new(
        ProjectionRebuild::new(projection, s.feed.clone())
            .batch_size(4)
            .batch_idle_timeout(Some(Duration::from_millis(200))),
    );
    let task = {
        let (r, l) = (rebuild.clone(), s.locks.clone());
        tokio::spawn(async move { r.run(&l, &CancellationToken::new()).await })
    };
    stalled.await.unwrap();
    // Written after the rebuild's batch began: the live feed hands them
    // out only once that transaction has ended.
    append_committed(&s.db, &s.feed, 9, 16).await;
    reach_live(&live, &mut live_task, 16).await;
    task.abort();
    let _ = task.await;
    stop.cancel();
    live_task.await.unwrap().unwrap();
    assert_eq!(
        texts(&s).await,
        marked("live", 1, 16),
        "the live version's rows"
    );
    assert_each_applied_once(&s.db.repository::<Seen>(), 16).await;
}
