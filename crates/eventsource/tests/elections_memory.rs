//! Leader election on the in-memory lock manager: one leader at a time,
//! terms that only grow, resign and loss hand over to the next candidate,
//! the watch stream reports vacancies, dropped campaigns leak nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventsource::coordination::{election_key, Election};
use eventsource::{InMemoryLockManager, LockRegistry};
use futures_util::StreamExt;

/// Polls `fut` once; true when it is still pending.
fn poll_once<F: std::future::Future>(fut: std::pin::Pin<&mut F>) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    fut.poll(&mut cx).is_pending()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_with_growing_terms() {
    let locks = InMemoryLockManager::new(Some("memory".into()));
    let leaders = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let election = Election::new(locks.clone(), "jobs");
        let (leaders, terms) = (leaders.clone(), terms.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let leading = election.campaign(None).await.unwrap();
                assert_eq!(leaders.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                terms.lock().unwrap().push(leading.term());
                tokio::task::yield_now().await;
                leaders.fetch_sub(1, Ordering::SeqCst);
                leading.resign().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let terms = terms.lock().unwrap();
    assert_eq!(terms.len(), 320);
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms grow: {terms:?}"
    );
}

#[tokio::test]
async fn resign_and_loss_hand_over_to_the_waiting_candidate() {
    let locks = InMemoryLockManager::new(None);
    let a = Election::new(locks.clone(), "svc");
    let b = Election::new(locks.clone(), "svc");
    assert_eq!(a.key(), election_key("svc"));
    let first = a.campaign(None).await.unwrap();
    assert!(b.try_campaign().await.unwrap().is_none());
    let err = b
        .campaign(Some(Duration::from_millis(20)))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    // Resign: the waiting candidate leads, with a later term.
    let waiting = tokio::spawn(async move { b.campaign(None).await });
    tokio::task::yield_now().await;
    assert!(
        !waiting.is_finished(),
        "a candidate waits while another leads"
    );
    let t1 = first.term();
    first.resign().await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    assert!(second.term() > t1);
    // Loss: the leader is told, the next candidate leads.
    let c = Election::new(locks.clone(), "svc");
    let next = tokio::spawn(async move { c.campaign(None).await });
    tokio::task::yield_now().await;
    assert!(locks.simulate_loss(&election_key("svc")));
    second.lost().await;
    assert!(second.is_lost());
    let third = next.await.unwrap().unwrap();
    assert!(third.term() > second.term());
    assert!(second.resign().await.unwrap_err().is_lock_lost());
    third.resign().await.unwrap();
}

#[tokio::test]
async fn watch_reports_the_leader_and_vacancies() {
    let locks = InMemoryLockManager::new(None);
    let election = Election::new(locks.clone(), "watched");
    let mut changes = Box::pin(election.watch(Duration::from_millis(5)));
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    let leading = election.campaign(None).await.unwrap();
    let seen = changes.next().await.unwrap().unwrap().expect("a leader");
    assert_eq!(seen.term, Some(leading.term()));
    assert_eq!(election.leader().await.unwrap(), Some(seen));
    leading.resign().await.unwrap();
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    let again = election.campaign(None).await.unwrap();
    let seen = changes.next().await.unwrap().unwrap().expect("a leader");
    assert_eq!(seen.term, Some(again.term()));
}

#[tokio::test]
async fn cancel_safety_a_dropped_campaign_leaves_nobody_leading() {
    let locks = InMemoryLockManager::new(None);
    let election = Election::new(locks.clone(), "dropped");
    let leading = election.campaign(None).await.unwrap();
    {
        let waiting = election.campaign(None);
        let mut waiting = std::pin::pin!(waiting);
        assert!(poll_once(waiting.as_mut()));
    } // dropped while queued
    leading.resign().await.unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
    assert_eq!(locks.held_lock_count(), 0);
    // try_campaign dropped after its first poll leaves nothing held either.
    {
        let trying = election.try_campaign();
        let mut trying = std::pin::pin!(trying);
        let _ = poll_once(trying.as_mut());
    }
    assert_eq!(locks.held_lock_count(), 0);
    assert!(election.try_campaign().await.unwrap().is_some());
}
