//! `coordination::once_per` with `PostgresRunLog` against a real
//! PostgreSQL: one run per interval, the server's clock at the claim (not
//! a transaction's start), and what a dropped call leaves.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgcoord::coordination::{once_per, OncePer, RunLog, RunStart};
use pgcoord::{error::BackendErrorKind, DistributedLock};
use pgcoord::{inspect::HoldersQuery, postgres::PostgresRunLog, PostgresLockManager};
use pgcoord_testkit::pg::TestDatabase;

const HOUR: Duration = Duration::from_secs(3600);
const BOUND: Duration = Duration::from_secs(60);

async fn installed() -> (TestDatabase, PostgresLockManager) {
    let db = TestDatabase::create().await.unwrap();
    let locks = PostgresLockManager::builder(db.config().into())
        .holder_id("once-per")
        .build()
        .unwrap();
    locks.install_fencing().await.unwrap();
    (db, locks)
}

/// Polls an async condition, bounded (no event says "a backend waits").
async fn until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + BOUND;
    while !cond().await {
        assert!(tokio::time::Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_run_within_the_interval_is_too_soon_and_gives_the_lock_back() {
    let (db, locks) = installed().await;
    let client = db.connect().await.unwrap();
    let log = PostgresRunLog::new(&client);
    let first = once_per(&locks, &log, "report", HOUR, Some(Duration::ZERO))
        .await
        .unwrap();
    let OncePer::Run { guard, started } = first else {
        panic!("the first run must run: {first:?}");
    };
    // The row the record made hands out no fencing token: none is shown.
    let query = HoldersQuery::keys(&["report"])
        .with_fences(&client)
        .await
        .unwrap();
    let held = query.run(&client).await.unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].fence, None, "{held:?}");
    guard.release().await.unwrap();
    let second = once_per(&locks, &log, "report", HOUR, Some(Duration::ZERO))
        .await
        .unwrap();
    match second {
        OncePer::TooSoon {
            last_started,
            now,
            next_at,
        } => {
            assert_eq!(last_started, started);
            assert!(now >= started);
            assert_eq!(next_at, started + chrono::Duration::hours(1));
        }
        other => panic!("the second run must be too soon: {other:?}"),
    }
    assert!(!locks.is_held("report"), "the lock is given back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_in_an_old_transaction_records_the_servers_clock_not_the_transactions_start() {
    let (db, _locks) = installed().await;
    let mut client = db.connect().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let began: DateTime<Utc> = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    // The transaction has been open a while once the server's clock moved on.
    let mut later = began;
    while later <= began {
        later = tx
            .query_one("SELECT clock_timestamp()", &[])
            .await
            .unwrap()
            .get(0);
    }
    let claimed = PostgresRunLog::new(&tx)
        .claim_start(&["nightly"], HOUR)
        .await
        .unwrap();
    let RunStart::Recorded { at } = claimed else {
        panic!("a first claim is recorded: {claimed:?}");
    };
    tx.commit().await.unwrap();
    assert!(
        at > later && at > began,
        "recorded {at}: must be the clock at the claim (after {later}), not now() ({began})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_is_claimed_all_or_none() {
    let (db, _locks) = installed().await;
    let client = db.connect().await.unwrap();
    let log = PostgresRunLog::new(&client);
    let one = log.claim_start(&["b"], HOUR).await.unwrap();
    assert!(matches!(one, RunStart::Recorded { .. }), "{one:?}");
    let set = log.claim_start(&["a", "b"], HOUR).await.unwrap();
    assert!(matches!(set, RunStart::TooSoon { .. }), "{set:?}");
    // "a" was not recorded by the refused set.
    let alone = log.claim_start(&["a"], HOUR).await.unwrap();
    assert!(matches!(alone, RunStart::Recorded { .. }), "{alone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_install_step_the_error_says_so() {
    let db = TestDatabase::create().await.unwrap();
    let client = db.connect().await.unwrap();
    let err = PostgresRunLog::new(&client)
        .claim_start(&["k"], HOUR)
        .await
        .unwrap_err();
    let backend = err.as_backend().expect("a backend error");
    assert_eq!(backend.kind(), BackendErrorKind::FencingNotInstalled);
    assert!(err.to_string().contains("install"), "{err}");
}

/// The documented cancel safety: dropped while the claim waits, the lock
/// is given back (nothing leaks), but the abandoned claim still records
/// the start, so the next call is too soon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_during_the_claim_it_leaks_no_lock_but_the_start_may_count() {
    let (db, locks) = installed().await;
    let client = db.connect().await.unwrap();
    let log = PostgresRunLog::new(&client);
    // The key's row, with no start yet, held FOR SHARE (as a fenced
    // writer's transaction does) so that the next claim waits.
    client
        .execute(
            "INSERT INTO eventsource_lock_fences (lock_id, key, fence) \
             VALUES (eventsource_lock_id('held-up'), 'held-up', 0)",
            &[],
        )
        .await
        .unwrap();
    let mut blocker = db.connect().await.unwrap();
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM eventsource_lock_fences WHERE lock_id = eventsource_lock_id('held-up') \
         FOR SHARE",
        &[],
    )
    .await
    .unwrap();
    let watcher = db.connect().await.unwrap();
    {
        let call = once_per(&locks, &log, "held-up", HOUR, None);
        tokio::pin!(call);
        let waiting = until("the claim waiting on the row lock", || async {
            watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                     AND query LIKE '%eventsource_lock_claim_run%'",
                    &[],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
                == 1
        });
        tokio::select! {
            _ = &mut call => panic!("the claim cannot finish while the row is held"),
            _ = waiting => {}
        }
    } // dropped here
    let free = until("the lock given back", || async {
        !locks.is_held("held-up")
    });
    tokio::time::timeout(BOUND, free).await.unwrap();
    tx.commit().await.unwrap();
    let next = once_per(&locks, &log, "held-up", HOUR, None).await.unwrap();
    assert!(
        matches!(next, OncePer::TooSoon { .. }),
        "the abandoned claim counted: {next:?}"
    );
    assert!(!locks.is_held("held-up"));
}
