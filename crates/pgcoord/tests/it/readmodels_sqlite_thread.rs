//! The thread that owns a SQLite database's connection: calls run on it and
//! not on the caller's; it ends when the database's last clone drops; a
//! panic in a call is an error, not a hang; a commit, rollback or begin
//! whose call was dropped never touches the transaction after it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use pgcoord::readmodels::sqlite::SqliteDatabase;
use pgcoord::readmodels::{Query, ReadModelRepository};
use pgcoord_testkit::readmodels::ConformanceItem;

async fn memory_db() -> SqliteDatabase {
    let db = SqliteDatabase::open_in_memory().await.unwrap();
    db.create_schema::<ConformanceItem>().await.unwrap();
    db
}

/// Polls `fut` once (so that whatever it queues is queued), then drops it.
async fn poll_once_then_drop<F: Future>(fut: F) {
    let mut fut = pin!(fut);
    std::future::poll_fn(|cx| {
        let _ = fut.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await;
}

thread_local! {
    /// Dropped, with the sender in it, when its thread exits.
    static EXIT_SIGNAL: RefCell<Option<mpsc::Sender<()>>> = const { RefCell::new(None) };
}

#[tokio::test]
async fn calls_run_on_the_database_thread_which_ends_with_the_last_clone() {
    let db = memory_db().await;
    let (signal, exited) = mpsc::channel::<()>();
    let name = db
        .call(move |_| {
            EXIT_SIGNAL.with(|s| *s.borrow_mut() = Some(signal));
            Ok(std::thread::current().name().map(str::to_owned))
        })
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("eventsource-sqlite"));

    // Clones, a repository and a finished transaction keep it alive.
    let clone = db.clone();
    let repo = clone.repository::<ConformanceItem>();
    let tx = db.transaction().await.unwrap();
    tx.commit().await.unwrap();
    drop(db);
    drop(clone);
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 0);
    assert_eq!(
        exited.try_recv(),
        Err(mpsc::TryRecvError::Empty),
        "the thread ended while a repository still used it"
    );

    drop(repo);
    // The thread's locals are dropped when it exits: the sender goes, and
    // the receiver sees the channel disconnected (the bound only turns a
    // leaked thread into a failure instead of a hang).
    let end = tokio::task::spawn_blocking(move || exited.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(end, Err(mpsc::RecvTimeoutError::Disconnected));
}

#[tokio::test]
async fn a_panicking_call_is_an_error_and_the_database_goes_on() {
    let db = memory_db().await;
    let err = db
        .call(|_| -> pgcoord::Result<()> { panic!("boom in a call") })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("boom in a call"), "{err}");

    // A transaction after it begins, writes and rolls back as usual.
    let tx = db.transaction().await.unwrap();
    let in_tx = tx.repository::<ConformanceItem>();
    in_tx
        .save(&ConformanceItem::new("rolled back"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    let repo = db.repository::<ConformanceItem>();
    repo.save(&ConformanceItem::new("after")).await.unwrap();
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 1);
    assert!(db.call(|c| Ok(c.is_autocommit())).await.unwrap());
}

#[tokio::test]
async fn a_dropped_commit_or_rollback_never_touches_the_next_transaction() {
    let db = memory_db().await;
    let repo = db.repository::<ConformanceItem>();
    for commit in [true, false] {
        repo.truncate().await.unwrap();
        let tx = db.transaction().await.unwrap();
        let first = ConformanceItem::new("first");
        tx.repository::<ConformanceItem>()
            .save(&first)
            .await
            .unwrap();
        if commit {
            poll_once_then_drop(tx.commit()).await;
        } else {
            poll_once_then_drop(tx.rollback()).await;
        }

        // The next transaction is its own: its writes roll back with it,
        // and nothing of the dropped call ends it early.
        let next = db.transaction().await.unwrap();
        let in_next = next.repository::<ConformanceItem>();
        in_next.save(&ConformanceItem::new("next")).await.unwrap();
        assert_eq!(in_next.count(&Query::new()).await.unwrap() as usize, {
            // "first" is there when the dropped commit ran, never otherwise.
            1 + usize::from(repo_has(&in_next, &first).await)
        });
        next.rollback().await.unwrap();
        assert_eq!(
            repo.count(&Query::new()).await.unwrap() as usize,
            usize::from(repo_has(&repo, &first).await),
            "the next transaction's write survived its rollback"
        );
        if !commit {
            assert!(!repo_has(&repo, &first).await, "a rollback committed");
        }
        assert!(db.call(|c| Ok(c.is_autocommit())).await.unwrap());
    }
}

#[tokio::test]
async fn a_begin_whose_call_was_dropped_leaves_no_transaction_open() {
    let db = memory_db().await;
    poll_once_then_drop(db.transaction()).await;
    assert!(db.call(|c| Ok(c.is_autocommit())).await.unwrap());
    let repo = db.repository::<ConformanceItem>();
    repo.save(&ConformanceItem::new("autocommit"))
        .await
        .unwrap();
    let tx = db.transaction().await.unwrap();
    tx.repository::<ConformanceItem>()
        .save(&ConformanceItem::new("in tx"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(repo.count(&Query::new()).await.unwrap(), 2);
}

async fn repo_has<R: ReadModelRepository<ConformanceItem>>(
    repo: &R,
    item: &ConformanceItem,
) -> bool {
    repo.get(item.meta.id).await.unwrap().is_some()
}
