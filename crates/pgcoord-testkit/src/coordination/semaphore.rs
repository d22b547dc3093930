//! Cases for `Semaphore`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pgcoord::coordination::{Semaphore, MAX_PERMITS};
use pgcoord::{error::AcquireFailure, lock_id_for_key, Error};

use crate::locks::{
    assert_becomes_free, eventually, expect_err, free_for, key, poll_n_then_drop, Conformant,
    SETTLE,
};

const LONG: Option<Duration> = Some(Duration::from_secs(60));
const IDLE: Duration = Duration::from_millis(50);

fn semaphore<L: Conformant>(lock: &L, name: &str, permits: u32) -> Semaphore<L> {
    Semaphore::new(lock.clone(), name, permits).expect("valid semaphore")
}

/// With N permits out, `try_acquire` gives none, here and in the other
/// manager; a release lets the other manager in.
#[doc(hidden)]
pub async fn semaphore_grants_at_most_n_permits<L: Conformant>(lock: &L, observer: &L) {
    let name = key("sem");
    let (mine, theirs) = (semaphore(lock, &name, 3), semaphore(observer, &name, 3));
    let mut permits = Vec::new();
    for _ in 0..3 {
        permits.push(mine.try_acquire().await.unwrap().expect("a free permit"));
    }
    let mut slots: Vec<u32> = permits.iter().map(|p| p.slot()).collect();
    slots.sort();
    assert_eq!(slots, [0, 1, 2]);
    assert!(
        mine.try_acquire().await.unwrap().is_none(),
        "a fourth permit"
    );
    assert!(
        theirs.try_acquire().await.unwrap().is_none(),
        "a fourth elsewhere"
    );
    let freed = permits[1].slot();
    drop(permits.remove(1));
    let p = theirs.acquire(LONG).await.expect("the released permit");
    assert_eq!(p.slot(), freed, "not the freed slot");
    permits.push(p);
    for p in permits {
        p.release().await.unwrap();
    }
}

/// Slot `i` is the key `"{name}#permit/{i}"`, with its usual lock id;
/// waiters queue on `"{name}#turnstile"`.
#[doc(hidden)]
pub async fn semaphore_keys_follow_the_documented_derivation<L: Conformant>(lock: &L, obs: &L) {
    let name = key("sem-keys");
    let sem = semaphore(lock, &name, 2);
    let p = sem.try_acquire().await.unwrap().unwrap();
    assert_eq!(p.key(), format!("{name}#permit/{}", p.slot()));
    assert_eq!(
        p.lock_id(),
        lock_id_for_key(&format!("{name}#permit/{}", p.slot()))
    );
    assert_eq!(
        Semaphore::<L>::slot_key(&name, 7),
        format!("{name}#permit/7")
    );
    assert_eq!(
        Semaphore::<L>::turnstile_key(&name),
        format!("{name}#turnstile")
    );
    assert!(!free_for(obs, p.key()).await, "the slot's lock is not held");
    p.release().await.unwrap();
    assert!(free_for(obs, &format!("{name}#permit/0")).await);
}

/// Zero permits, too many, or a name too long for its keys: invalid.
#[doc(hidden)]
pub async fn semaphore_refuses_bad_counts<L: Conformant>(lock: &L, _o: &L) {
    for n in [0, MAX_PERMITS + 1] {
        let err = Semaphore::new(lock.clone(), "s", n).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(err.to_string().contains(&n.to_string()), "{err}");
    }
    let long = "n".repeat(1 << 20);
    assert!(matches!(
        Semaphore::new(lock.clone(), long, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(semaphore(lock, "s", MAX_PERMITS).permits(), MAX_PERMITS);
}

/// A full semaphore times out with an acquisition error on its name that
/// carries the timeout; nothing of the attempt stays held.
#[doc(hidden)]
pub async fn semaphore_timeout_names_the_semaphore_and_holds_nothing<L: Conformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("sem-timeout");
    let theirs = semaphore(observer, &name, 1);
    let held = theirs.try_acquire().await.unwrap().unwrap();
    if let Some(warm) = lock.try_lock(&key("warm")).await.unwrap() {
        warm.release().await.unwrap();
    }
    let before = lock.held_lock_count();
    let mine = semaphore(lock, &name, 1);
    for t in [Duration::from_millis(150), Duration::ZERO] {
        let what = "a permit was granted while another participant holds the only one";
        let err = expect_err(mine.acquire(Some(t)).await, what);
        assert!(err.is_timeout(), "{err:?}");
        assert_eq!(err.key(), Some(name.as_str()));
        assert_eq!(err.as_lock_acquisition().unwrap().timeout, Some(t));
    }
    eventually("count back", SETTLE, || lock.held_lock_count() == before).await;
    assert_becomes_free(observer, &Semaphore::<L>::turnstile_key(&name)).await;
    held.release().await.unwrap();
}

/// A waiter gets the permit a holder gives back.
#[doc(hidden)]
pub async fn semaphore_waiter_gets_a_released_permit<L: Conformant>(lock: &L, observer: &L) {
    let name = key("sem-wait");
    let theirs = semaphore(observer, &name, 2);
    let a = theirs.try_acquire().await.unwrap().unwrap();
    let b = theirs.try_acquire().await.unwrap().unwrap();
    let mine = semaphore(lock, &name, 2);
    let waiter = tokio::spawn(async move { mine.acquire(LONG).await });
    let turnstile = Semaphore::<L>::turnstile_key(&name);
    // The waiter is the head of the queue once it holds the turnstile.
    crate::locks::eventually_async("the waiter queued", || async {
        !free_for(observer, &turnstile).await
    })
    .await;
    let freed = b.slot();
    b.release().await.unwrap();
    let p = waiter.await.unwrap().unwrap();
    assert_eq!(p.slot(), freed);
    assert_becomes_free(observer, &turnstile).await;
    p.release().await.unwrap();
    a.release().await.unwrap();
}

/// Several waiters on a full semaphore of one permit: each release lets
/// exactly one in, until all had their turn.
#[doc(hidden)]
pub async fn semaphore_waiters_are_served_one_per_release<L: Conformant>(lock: &L, observer: &L) {
    let name = key("sem-turns");
    let theirs = semaphore(observer, &name, 1);
    let held = theirs.try_acquire().await.unwrap().unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (sem, served, tx) = (semaphore(lock, &name, 1), served.clone(), tx.clone());
        tasks.push(tokio::spawn(async move {
            let p = sem.acquire(LONG).await.unwrap();
            served.fetch_add(1, Ordering::SeqCst);
            let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
            tx.send(done_tx).unwrap();
            let _ = done_rx.await;
            p.release().await.unwrap();
        }));
    }
    assert_eq!(served.load(Ordering::SeqCst), 0);
    held.release().await.unwrap();
    for turn in 1..=4 {
        let done = rx.recv().await.unwrap();
        assert_eq!(
            served.load(Ordering::SeqCst),
            turn,
            "two holders of one permit"
        );
        done.send(()).unwrap();
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Tasks of both managers loop acquire / release on N permits: never more
/// than N inside at once, and every call finishes.
#[doc(hidden)]
pub async fn semaphore_tasks_of_two_managers_never_exceed_n<L: Conformant>(lock: &L, obs: &L) {
    let name = key("sem-many");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let sem = semaphore(if t % 2 == 0 { lock } else { obs }, &name, 3);
        let (inside, most) = (inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let p = sem.acquire(LONG).await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                assert!(now <= 3, "{now} holders of 3 permits");
                tokio::time::sleep(Duration::from_micros(300)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                p.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(most.load(Ordering::SeqCst) >= 1);
    assert_eq!(lock.held_lock_count(), 0);
    assert_eq!(obs.held_lock_count(), 0);
}

/// A participant created with more permits holds a slot beyond this one's
/// count: this one's waiter reports the mismatch instead of waiting.
#[doc(hidden)]
pub async fn semaphore_detects_a_participant_with_more_permits<L: Conformant>(lock: &L, obs: &L) {
    let name = key("sem-mismatch");
    let theirs = semaphore(obs, &name, 3);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(theirs.try_acquire().await.unwrap().unwrap());
    }
    let mine = semaphore(lock, &name, 2);
    assert!(mine.try_acquire().await.unwrap().is_none());
    let what = "a 2-permit participant got a permit while a 3-permit one holds all three \
                slots: the implementation's try_lock or acquire granted a held key";
    let err = expect_err(mine.acquire(LONG).await, what);
    assert!(
        matches!(
            err.as_lock_acquisition().map(|e| &e.reason),
            Some(AcquireFailure::PermitCountMismatch { permits: 2 })
        ),
        "{err:?}"
    );
    assert_eq!(err.key(), Some(name.as_str()));
    for p in held {
        p.release().await.unwrap();
    }
}

/// Slot `permits` held elsewhere for a moment (a head waiter's probe of
/// it given back slowly, its session being ended) is no participant with
/// more permits: the waiter goes on and gets the next free permit.
#[doc(hidden)]
pub async fn semaphore_does_not_take_a_passing_probe_for_a_larger_participant<L: Conformant>(
    lock: &L,
    observer: &L,
) {
    let name = key("sem-passing-probe");
    let theirs = semaphore(observer, &name, 2);
    let permits = [
        theirs.try_acquire().await.unwrap().unwrap(),
        theirs.try_acquire().await.unwrap().unwrap(),
    ];
    let probe = observer
        .acquire(&Semaphore::<L>::slot_key(&name, 2), LONG)
        .await
        .unwrap();
    let mine = semaphore(lock, &name, 2);
    let waiter = {
        let mine = mine.clone();
        tokio::spawn(async move { mine.acquire(LONG).await })
    };
    // A fifth of the second the head waiter gives such a probe, then a
    // permit freed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    probe.release().await.unwrap();
    let [first, second] = permits;
    first.release().await.unwrap();
    let got = waiter.await.unwrap();
    let permit = got.unwrap_or_else(|e| panic!("a passing probe was taken for a mismatch: {e:?}"));
    permit.release().await.unwrap();
    second.release().await.unwrap();
}

/// `try_acquire` dropped after every possible number of polls leaks nothing.
#[doc(hidden)]
pub async fn cancel_semaphore_try_acquire_at_every_poll<L: Conformant>(lock: &L, obs: &L) {
    let name = key("sem-cancel-try");
    let sem = semaphore(lock, &name, 2);
    for n in 0..64 {
        let out = poll_n_then_drop(sem.try_acquire(), n, IDLE).await;
        let done = out.is_some();
        drop(out);
        for i in 0..2 {
            assert_becomes_free(obs, &Semaphore::<L>::slot_key(&name, i)).await;
        }
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
        if done {
            return;
        }
    }
    panic!("try_acquire did not complete within 64 polls");
}

/// A waiting `acquire` dropped at any point leaves no slot, no turnstile
/// and no waiter behind.
#[doc(hidden)]
pub async fn cancel_semaphore_acquire_at_every_poll<L: Conformant>(lock: &L, obs: &L) {
    let name = key("sem-cancel");
    let theirs = semaphore(obs, &name, 1);
    let sem = semaphore(lock, &name, 1);
    for n in 1..16 {
        // Waits out a grant the engine may still be giving back: a dropped
        // short wait can be left to end on its own server-side timeout.
        let held = theirs.acquire(LONG).await.unwrap();
        let before = lock.held_lock_count();
        let out = poll_n_then_drop(sem.acquire(None), n, IDLE).await;
        assert!(out.is_none(), "a wait on a full semaphore ended: {out:?}");
        eventually("count back", SETTLE, || lock.held_lock_count() == before).await;
        held.release().await.unwrap();
        for k in [
            Semaphore::<L>::slot_key(&name, 0),
            Semaphore::<L>::slot_key(&name, 1),
            Semaphore::<L>::turnstile_key(&name),
        ] {
            assert_becomes_free(obs, &k).await;
        }
        eventually("count back to 0", SETTLE, || lock.held_lock_count() == 0).await;
    }
}
