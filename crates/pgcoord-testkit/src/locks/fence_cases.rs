//! Conformance cases for fencing tokens. The suite's caller says whether
//! its implementation hands out tokens ([`Fencing`]): one that does must
//! give a token with every exclusive acquisition, strictly greater than
//! every earlier token of the same key, whichever path the grant took
//! (free, contended, try, manual); one that does not must give none. A
//! fencing implementation that stops issuing tokens fails here.

use std::time::Duration;

use pgcoord::LockInfo;

use super::{key, Conformant};

/// Whether the implementation under test hands out fencing tokens; the
/// fence cases of [`lock_conformance_tests!`](crate::lock_conformance_tests)
/// check the tokens against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// Every exclusive grant carries a token, increasing per key.
    Tokens,
    /// No grant carries a token.
    NoTokens,
}

/// Checks the tokens seen so far against `fencing`: all absent, or all
/// present and strictly increasing.
fn check_sequence(infos: &[LockInfo], fencing: Fencing) {
    let fences: Vec<Option<u64>> = infos.iter().map(|i| i.fence).collect();
    if fencing == Fencing::NoTokens {
        assert!(
            fences.iter().all(Option::is_none),
            "an implementation without fencing handed out tokens: {fences:?}"
        );
        return;
    }
    assert!(
        fences.iter().all(Option::is_some),
        "a fencing implementation must give a token with every acquisition: {fences:?}"
    );
    for pair in fences.windows(2) {
        assert!(
            pair[0] < pair[1],
            "fencing tokens must increase: {fences:?}"
        );
    }
}

/// Every path of a grant yields a larger token than the grant before it.
pub async fn fences_increase_on_every_path<L: Conformant>(
    lock: &L,
    observer: &L,
    fencing: Fencing,
) {
    let k = key("fences");
    let mut seen = Vec::new();
    // Free key, through acquire.
    let g = lock
        .acquire(&k, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(g.fence(), g.info().fence);
    seen.push(g.info().clone());
    g.release().await.unwrap();
    // The other manager, through try_acquire (manual).
    let info = observer
        .try_lock(&k)
        .await
        .map(|g| g.map(pgcoord::LockGuard::into_manual))
        .unwrap()
        .expect("free");
    seen.push(info);
    // Contended: a waiter is granted when the holder releases (adapters
    // test the queued path with their own means of seeing the queue).
    let waiter = {
        let (lock, k) = (lock.clone(), k.clone());
        tokio::spawn(async move { lock.acquire(&k, Some(Duration::from_secs(30))).await })
    };
    // Usually queued by now; either way its grant comes after the release.
    tokio::task::yield_now().await;
    observer.release(&k).await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    seen.push(g.info().clone());
    g.release().await.unwrap();
    // Through try_lock, then with_lock.
    let g = observer.try_lock(&k).await.unwrap().expect("free");
    seen.push(g.info().clone());
    g.release().await.unwrap();
    let info = lock
        .with_lock(&k, None, |info| async move { info })
        .await
        .unwrap();
    seen.push(info);
    check_sequence(&seen, fencing);
}

/// Distinct keys have independent tokens; a key's token never goes back
/// after another key was locked in between.
pub async fn fences_are_per_key_and_never_repeat<L: Conformant>(
    lock: &L,
    observer: &L,
    fencing: Fencing,
) {
    let (a, b) = (key("fence-a"), key("fence-b"));
    let mut seen_a = Vec::new();
    for round in 0..3 {
        let ga = lock.acquire(&a, None).await.unwrap();
        let gb = observer.acquire(&b, None).await.unwrap();
        let want = fencing == Fencing::Tokens;
        assert!(
            ga.fence().is_some() == want && gb.fence().is_some() == want,
            "round {round}: {fencing:?} expected, tokens {:?} and {:?}",
            ga.fence(),
            gb.fence()
        );
        seen_a.push(ga.info().clone());
        gb.release().await.unwrap();
        ga.release().await.unwrap();
    }
    check_sequence(&seen_a, fencing);
}
