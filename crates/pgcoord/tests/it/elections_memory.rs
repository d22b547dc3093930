//! Leader election on the in-memory lock manager: the election suite of
//! the testkit (timeouts, resign and loss hand over, terms that only grow,
//! one leader among candidates, what an observer sees, dropped campaigns),
//! then many candidates of one manager.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pgcoord::coordination::Election;
use pgcoord::InMemoryLockManager;

// The manager is its own breaker (`simulate_loss`).
pgcoord_testkit::election_conformance_tests!(|| async {
    let locks = InMemoryLockManager::new(Some("memory".into()));
    (locks.clone(), locks.clone(), locks)
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_with_growing_terms() {
    let locks = InMemoryLockManager::new(Some("memory".into()));
    let leaders = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let election = Election::new(locks.clone(), "jobs").expect("a fencing lock manager");
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

/// A manager without fencing tokens is refused when the election is built,
/// even while the election's key is held (nothing waits for it); its
/// guards carry no token.
#[tokio::test]
async fn an_election_refuses_a_manager_without_fencing_before_any_wait() {
    use pgcoord::DistributedLock;
    let plain = InMemoryLockManager::without_fencing(Some("plain".into()));
    assert!(!plain.fences());
    let held = plain
        .acquire(&pgcoord::coordination::election_key("jobs"), None)
        .await
        .unwrap();
    assert_eq!(held.fence(), None);
    let err = Election::new(plain.clone(), "jobs").unwrap_err();
    assert!(matches!(err, pgcoord::Error::InvalidArgument(_)), "{err}");
    held.release().await.unwrap();
    assert!(InMemoryLockManager::new(None).fences());
}

/// A name too long to lock is refused when the election is built, as a
/// semaphore's is, not at the first campaign.
#[tokio::test]
async fn an_election_refuses_a_name_too_long_to_lock() {
    use pgcoord::coordination::ELECTION_KEY_PREFIX;
    use pgcoord::MAX_KEY_LEN;
    let locks = InMemoryLockManager::new(Some("memory".into()));
    let longest = "x".repeat(MAX_KEY_LEN - ELECTION_KEY_PREFIX.len());
    let election = Election::new(locks.clone(), longest).expect("the longest name fits");
    election
        .campaign(None)
        .await
        .unwrap()
        .resign()
        .await
        .unwrap();
    let err = Election::new(
        locks,
        "x".repeat(MAX_KEY_LEN - ELECTION_KEY_PREFIX.len() + 1),
    )
    .unwrap_err();
    assert!(matches!(err, pgcoord::Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("election name"), "{err}");
}
