//! Cases for `Election::run_while_leading`: each round is a new term seen
//! by observers, a stop ends the work and resigns, a lost leadership
//! cancels the work's token and the loop leads again, a stop while another
//! leads returns at once, and a dropped loop leaves nothing behind.
//!
//! Run by [`election_conformance_tests!`](crate::election_conformance_tests).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgcoord::coordination::{Election, LeaderTerm};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::election::{ElectionConformant, LeadershipBreaker};
use crate::locks::{eventually, eventually_async, key, poll_n_then_drop, SETTLE};

fn election<L: ElectionConformant>(lock: &L, name: &str) -> Election<L> {
    Election::new(lock.clone(), name).expect("a fencing lock manager")
}

/// Waits (generously) for the next term handed to the work.
async fn next_term(terms: &mut mpsc::UnboundedReceiver<LeaderTerm>) -> LeaderTerm {
    tokio::time::timeout(SETTLE, terms.recv())
        .await
        .expect("no term was handed to the work")
        .expect("the loop ended")
}

/// Waits until nobody leads `election` and `lock` holds nothing.
async fn assert_vacant<L: ElectionConformant>(lock: &L, election: &Election<L>) {
    eventually_async("nobody leads", || async {
        election.leader().await.unwrap().is_none()
    })
    .await;
    eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
}

/// Three rounds of a work that returns at once: three strictly growing
/// terms; while a fourth round's work runs, an observer sees it leading
/// with its term; cancelling `stop` cancels that work's token, the loop
/// returns `Ok` once the work has, and nobody leads afterwards.
#[doc(hidden)]
pub async fn election_run_while_leading_runs_each_term_and_stops<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-run");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    let stop = CancellationToken::new();
    let (tx, mut terms) = mpsc::unbounded_channel();
    let rounds = Arc::new(Mutex::new(0usize));
    let run = {
        let (stop, rounds) = (stop.clone(), rounds.clone());
        tokio::spawn(async move {
            mine.run_while_leading(&stop, move |term| {
                let n = {
                    let mut r = rounds.lock().unwrap();
                    *r += 1;
                    *r
                };
                tx.send(term.clone()).unwrap();
                async move {
                    if n > 3 {
                        term.token().cancelled().await; // the fourth round runs until stopped
                    }
                }
            })
            .await
        })
    };
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(next_term(&mut terms).await);
    }
    assert!(
        seen.windows(2).all(|w| w[0].term() < w[1].term()),
        "terms {:?}",
        seen.iter().map(LeaderTerm::term).collect::<Vec<_>>()
    );
    let fourth = &seen[3];
    assert!(
        seen[..3].iter().all(LeaderTerm::is_over),
        "a finished term is over"
    );
    let leader = theirs
        .leader()
        .await
        .unwrap()
        .expect("the fourth round leads");
    assert_eq!(leader.term, Some(fourth.term()), "the observed term");
    assert_eq!(
        fourth.info().fence,
        Some(fourth.term()),
        "the term is the token"
    );
    assert!(!fourth.is_over(), "a running term is not over");
    stop.cancel();
    assert!(fourth.is_over(), "stop ends the running term");
    tokio::time::timeout(SETTLE, run)
        .await
        .expect("the loop did not return after stop")
        .unwrap()
        .unwrap();
    assert_eq!(*rounds.lock().unwrap(), 4, "no round after stop");
    assert_vacant(lock, &theirs).await;
}

/// A leadership taken away from outside cancels the running work's token
/// (stop was not cancelled); once the work returns, the loop campaigns
/// again and the next work gets a later term.
#[doc(hidden)]
pub async fn election_run_while_leading_tells_the_work_of_a_loss<L, B>(
    lock: &L,
    observer: &L,
    breaker: &B,
) where
    L: ElectionConformant,
    B: LeadershipBreaker,
{
    let name = key("el-run-loss");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    let stop = CancellationToken::new();
    let (tx, mut terms) = mpsc::unbounded_channel();
    let run = {
        let stop = stop.clone();
        tokio::spawn(async move {
            mine.run_while_leading(&stop, move |term| {
                tx.send(term.clone()).unwrap();
                async move { term.token().cancelled().await }
            })
            .await
        })
    };
    let first = next_term(&mut terms).await;
    assert!(!first.is_over());
    breaker.end_hold(theirs.key()).await;
    tokio::time::timeout(SETTLE, first.token().cancelled())
        .await
        .expect("the lost term's token was never cancelled");
    assert!(!stop.is_cancelled(), "a loss is not a stop");
    let second = next_term(&mut terms).await;
    assert!(
        second.term() > first.term(),
        "{} after {}",
        second.term(),
        first.term()
    );
    assert!(!second.is_over());
    let leader = theirs
        .leader()
        .await
        .unwrap()
        .expect("the second term leads");
    assert_eq!(leader.term, Some(second.term()));
    stop.cancel();
    tokio::time::timeout(SETTLE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_vacant(lock, &theirs).await;
}

/// While another candidate leads, the loop waits in the queue without
/// running the work; cancelling `stop` returns `Ok` at once, and the
/// election is free once the other resigns.
#[doc(hidden)]
pub async fn election_run_while_leading_stops_while_campaigning<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-run-wait");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    let leading = theirs.campaign(Some(SETTLE)).await.unwrap();
    let stop = CancellationToken::new();
    let ran = Arc::new(Mutex::new(false));
    let run = {
        let (stop, ran) = (stop.clone(), ran.clone());
        tokio::spawn(async move {
            mine.run_while_leading(&stop, move |_| {
                *ran.lock().unwrap() = true;
                async {}
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    assert!(!run.is_finished(), "returned while another leads");
    stop.cancel();
    tokio::time::timeout(SETTLE, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!*ran.lock().unwrap(), "the work ran while another led");
    let seen = theirs
        .leader()
        .await
        .unwrap()
        .expect("the other still leads");
    assert_eq!(seen.term, Some(leading.term()));
    leading.resign().await.unwrap();
    assert_vacant(lock, &theirs).await;
}

/// The loop dropped after every number of polls (campaigning, leading with
/// its work pending) leaves nobody leading and nothing held.
#[doc(hidden)]
pub async fn election_cancel_run_while_leading_at_every_poll<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-run-cancel");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    let stop = CancellationToken::new();
    let mut led = false;
    for n in 0..24 {
        let started = Arc::new(Mutex::new(false));
        let flag = started.clone();
        let run = mine.run_while_leading(&stop, move |_| {
            *flag.lock().unwrap() = true;
            std::future::pending::<()>()
        });
        let out = poll_n_then_drop(run, n, Duration::from_millis(50)).await;
        assert!(out.is_none(), "the loop ended without a stop: {out:?}");
        led |= *started.lock().unwrap();
        assert_vacant(lock, &theirs).await;
    }
    assert!(led, "no round reached the work within 24 polls");
}
