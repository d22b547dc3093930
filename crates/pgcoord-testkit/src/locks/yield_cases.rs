//! A try that finds the key held is answered at once, without I/O on a
//! database manager when this manager holds the key; a loop of such tries
//! must still let the other tasks of its runtime run
//! ([`lock_conformance_tests!`](crate::lock_conformance_tests)), as
//! tokio's own primitives do under its cooperative budget.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{key, Conformant};

/// More tries than any cooperative budget lets one task make in one turn
/// (tokio's is 128), far fewer than a starved loop makes.
const TRIES_BEFORE_GIVING_UP: usize = 100_000;

/// A task retrying `try_lock` on a key its own manager holds lets another
/// future of the same task run: polled together, the other one ends the
/// loop.
#[doc(hidden)]
pub async fn try_lock_retried_on_a_held_key_yields_to_other_tasks<L: Conformant>(
    lock: &L,
    _observer: &L,
) {
    let k = key("try-yields");
    let guard = lock.acquire(&k, None).await.unwrap();
    let done = AtomicBool::new(false);
    let retrying = async {
        let mut tries = 0;
        while !done.load(Ordering::SeqCst) {
            assert!(lock.try_lock(&k).await.unwrap().is_none());
            tries += 1;
            assert!(
                tries < TRIES_BEFORE_GIVING_UP,
                "{tries} tries of a held key never gave the runtime back"
            );
        }
    };
    // Polled only once `retrying` has returned Pending.
    let other = async { done.store(true, Ordering::SeqCst) };
    tokio::join!(retrying, other);
    guard.release().await.unwrap();
}
