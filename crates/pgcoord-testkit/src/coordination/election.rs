//! Cases for `Election`: campaign timeouts, hand-over on resign and on
//! loss, terms that only grow, one leader among many candidates, what an
//! observer sees (a leader with its term, a vacancy), dropped campaigns.
//!
//! Run by [`election_conformance_tests!`](crate::election_conformance_tests).
//! Besides the lock ports the cases need [`LeaderObserver`] (who leads)
//! and a [`LeadershipBreaker`], which takes a leadership away from outside
//! as the end of its session would.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use pgcoord::coordination::{Election, Leader, LeaderObserver, Leadership};
use pgcoord::InMemoryLockManager;

use crate::locks::{eventually, expect_err, key, poll_n_then_drop, Conformant, SETTLE};

/// What an election case needs of an implementation: the lock ports with
/// fencing tokens (the terms) and a view of who leads.
pub trait ElectionConformant: Conformant + LeaderObserver {}
impl<T: Conformant + LeaderObserver> ElectionConformant for T {}

/// Takes the lock of a key away from its holder, from outside, as the end
/// of the holder's session would: the holder's loss signal fires and the
/// next waiting candidate is served.
pub trait LeadershipBreaker: Send + Sync {
    /// Ends the hold on `key`; panics when nobody holds it.
    ///
    /// # Cancel safety
    ///
    /// Implementations need not be cancel safe: a case always awaits it.
    fn end_hold(&self, key: &str) -> impl Future<Output = ()> + Send;
}

/// The in-memory manager's own simulated loss.
impl LeadershipBreaker for InMemoryLockManager {
    async fn end_hold(&self, key: &str) {
        assert!(self.simulate_loss(key), "nobody held {key}");
    }
}

const SHORT: Duration = Duration::from_millis(150);
const IDLE: Duration = Duration::from_millis(50);

fn election<L: ElectionConformant>(lock: &L, name: &str) -> Election<L> {
    Election::new(lock.clone(), name).expect("a fencing lock manager")
}

/// Waits (generously) for `leading` to be told it lost.
async fn assert_told_lost(leading: &Leadership) {
    tokio::time::timeout(SETTLE * 3, leading.lost())
        .await
        .expect("the leadership's loss signal never fired");
    assert!(leading.is_lost());
    assert!(leading.loss_signal().is_lost());
}

/// Asserts that `seen` is the observation of `leading`: its term, and its
/// holder id where the observer knows one.
fn assert_seen_as(seen: Option<Leader>, leading: &Leadership) {
    let seen = seen.expect("an observer sees no leader while one leads");
    assert_eq!(seen.term, Some(leading.term()), "the observed term");
    if seen.holder_id.is_some() {
        assert_eq!(
            seen.holder_id.as_deref(),
            leading.info().holder_id.as_deref(),
            "the observed holder"
        );
    }
}

/// While another candidate leads, a campaign with a timeout fails with the
/// lock's timeout error on the election's key (a zero timeout too),
/// `try_campaign` gives `None`, and the leader stays as it was.
#[doc(hidden)]
pub async fn election_campaign_times_out_while_another_leads<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-timeout");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    let leading = theirs.campaign(Some(SETTLE)).await.unwrap();
    let before = lock.held_lock_count();
    for t in [SHORT, Duration::ZERO] {
        let what = "a campaign won while another candidate leads: the implementation's \
                    acquire granted a held key";
        let err = expect_err(mine.campaign(Some(t)).await, what);
        assert!(err.is_timeout(), "{err:?}");
        assert_eq!(err.key(), Some(mine.key()));
    }
    assert!(mine.try_campaign().await.unwrap().is_none());
    eventually("count back", SETTLE, || lock.held_lock_count() == before).await;
    assert_seen_as(mine.leader().await.unwrap(), &leading);
    assert!(!leading.is_lost());
    leading.resign().await.unwrap();
}

/// A candidate waiting while another leads is served when the leader
/// resigns, with a later term; once it resigns, the election is free.
#[doc(hidden)]
pub async fn election_campaign_succeeds_after_resign<L: ElectionConformant>(lock: &L, obs: &L) {
    let name = key("el-resign");
    let (mine, theirs) = (election(lock, &name), election(obs, &name));
    let first = theirs.campaign(Some(SETTLE)).await.unwrap();
    let waiting = tokio::spawn(async move { mine.campaign(None).await });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "led while another leads");
    let t1 = first.term();
    first.resign().await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    assert!(second.term() > t1, "{} after {t1}", second.term());
    assert_seen_as(theirs.leader().await.unwrap(), &second);
    second.resign().await.unwrap();
    let third = theirs.campaign(Some(Duration::ZERO)).await.unwrap();
    assert!(third.term() > t1 + 1);
    third.resign().await.unwrap();
}

/// Leaders following one another (both managers, by `campaign`,
/// `try_campaign`, resign and drop) have strictly increasing terms, and
/// each is observed with its own term.
#[doc(hidden)]
pub async fn election_terms_strictly_increase_across_leaders<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-terms");
    let sides = [election(lock, &name), election(observer, &name)];
    let mut terms = Vec::new();
    for round in 0..10 {
        let side = &sides[round % 2];
        let leading = if round % 3 == 0 {
            side.try_campaign().await.unwrap().expect("a free election")
        } else {
            side.campaign(Some(SETTLE)).await.unwrap()
        };
        assert_seen_as(sides[(round + 1) % 2].leader().await.unwrap(), &leading);
        terms.push(leading.term());
        if round % 4 == 3 {
            drop(leading); // resigns in the background
            crate::locks::eventually_async("the dropped leadership resigned", || async {
                side.leader().await.unwrap().is_none()
            })
            .await;
        } else {
            leading.resign().await.unwrap();
        }
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms {terms:?}");
}

/// Candidates of both managers campaign and resign in a loop: never two
/// leaders at once, and in the order they led, terms strictly increase.
#[doc(hidden)]
pub async fn election_one_leader_at_a_time_among_candidates<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-many");
    let inside = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..6 {
        let candidate = election(if c % 2 == 0 { lock } else { observer }, &name);
        let (inside, terms) = (inside.clone(), terms.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let leading = candidate.campaign(Some(SETTLE * 3)).await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                terms.lock().unwrap().push(leading.term());
                assert_seen_as(candidate.leader().await.unwrap(), &leading);
                inside.fetch_sub(1, Ordering::SeqCst);
                leading.resign().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let terms = terms.lock().unwrap();
    assert_eq!(terms.len(), 30);
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms {terms:?}");
}

/// A leadership taken away from outside fires its loss signal; the
/// waiting candidate leads with a later term; resigning the lost one is
/// `LockLost`; and the deposed side can lead again afterwards.
#[doc(hidden)]
pub async fn election_lost_leadership_signals_and_hands_over<L, B>(
    lock: &L,
    observer: &L,
    breaker: &B,
) where
    L: ElectionConformant,
    B: LeadershipBreaker,
{
    let name = key("el-loss");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    let leading = mine.campaign(Some(SETTLE)).await.unwrap();
    let signal = leading.loss_signal();
    assert!(!leading.is_lost() && !signal.is_lost());
    let waiting = tokio::spawn(async move { theirs.campaign(None).await });
    breaker.end_hold(mine.key()).await;
    assert_told_lost(&leading).await;
    signal.lost().await;
    let next = waiting.await.unwrap().unwrap();
    assert!(next.term() > leading.term());
    assert!(!next.is_lost());
    let what = "resign() of a leadership whose lock was lost returned Ok";
    let err = expect_err(leading.resign().await, what);
    assert!(err.is_lock_lost(), "{err:?}");
    assert_seen_as(mine.leader().await.unwrap(), &next);
    let t = next.term();
    next.resign().await.unwrap();
    let again = mine.campaign(Some(SETTLE)).await.unwrap();
    assert!(again.term() > t);
    again.resign().await.unwrap();
}

/// `leader()` is `None` while vacant and the leader with its term while
/// one leads, from either manager; `watch` starts with the state and then
/// reports each leader and each vacancy (a dropped leadership's too).
#[doc(hidden)]
pub async fn election_observe_reports_the_leader_and_vacancies<L: ElectionConformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("el-watch");
    let (mine, theirs) = (election(lock, &name), election(observer, &name));
    assert_eq!(theirs.leader().await.unwrap(), None, "vacant at first");
    let mut changes = Box::pin(theirs.watch(Duration::from_millis(10)));
    assert_eq!(next(&mut changes).await, None, "the first look: vacant");
    let leading = mine.campaign(Some(SETTLE)).await.unwrap();
    assert_seen_as(next(&mut changes).await, &leading);
    assert_seen_as(theirs.leader().await.unwrap(), &leading);
    assert_seen_as(mine.leader().await.unwrap(), &leading);
    leading.resign().await.unwrap();
    assert_eq!(theirs.leader().await.unwrap(), None, "vacant after resign");
    assert_eq!(next(&mut changes).await, None, "the vacancy reported");
    let second = theirs.campaign(Some(SETTLE)).await.unwrap();
    assert_seen_as(next(&mut changes).await, &second);
    drop(second);
    assert_eq!(
        next(&mut changes).await,
        None,
        "a dropped leadership's vacancy"
    );
}

/// A `campaign` dropped after every number of polls while another leads
/// leaves nothing behind: once the leader resigns, nobody leads.
#[doc(hidden)]
pub async fn election_cancel_campaign_at_every_poll<L: ElectionConformant>(lock: &L, obs: &L) {
    let name = key("el-cancel");
    let (mine, theirs) = (election(lock, &name), election(obs, &name));
    for n in 1..8 {
        let leading = theirs.campaign(Some(SETTLE)).await.unwrap();
        let out = poll_n_then_drop(mine.campaign(None), n, IDLE).await;
        assert!(
            out.is_none(),
            "a campaign ended while another leads: {out:?}"
        );
        leading.resign().await.unwrap();
        crate::locks::eventually_async("nobody leads", || async {
            theirs.leader().await.unwrap().is_none()
        })
        .await;
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
    }
}

/// A `try_campaign` dropped after every number of polls leaves nobody
/// leading.
#[doc(hidden)]
pub async fn election_cancel_try_campaign_at_every_poll<L: ElectionConformant>(lock: &L, obs: &L) {
    let name = key("el-cancel-try");
    let (mine, theirs) = (election(lock, &name), election(obs, &name));
    for n in 0..64 {
        let out = poll_n_then_drop(mine.try_campaign(), n, IDLE).await;
        let done = out.is_some();
        // A dropped attempt of the round before may still be giving the
        // election back, so this one can find it taken (`Some(None)`).
        if let Some(Some(leading)) = out.map(|r| r.unwrap()) {
            leading.resign().await.unwrap();
        }
        crate::locks::eventually_async("nobody leads", || async {
            theirs.leader().await.unwrap().is_none()
        })
        .await;
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        if done {
            return;
        }
    }
    panic!("try_campaign did not complete within 64 polls");
}

/// The next observation of a watch stream; panics on an error or its end.
async fn next<S>(stream: &mut Pin<Box<S>>) -> Option<Leader>
where
    S: Stream<Item = pgcoord::Result<Option<Leader>>> + ?Sized,
{
    stream
        .next()
        .await
        .expect("the watch stream ended")
        .expect("the watch stream yielded an error")
}
