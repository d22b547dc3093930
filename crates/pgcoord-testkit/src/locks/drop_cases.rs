//! What the manager that dropped a guard sees right after: the key is its
//! own to take again at once ([`lock_conformance_tests!`](crate::lock_conformance_tests)).
//! Another manager may see the key held a moment longer (a dropped guard
//! may be released in the background); the manager that let it go must
//! not.

use std::time::Duration;

use super::{key, Conformant};

/// How many times the drop and the retake are repeated (a release that
/// races the next try shows up in some rounds only).
const ROUNDS: usize = 20;

/// A key whose guard this manager just dropped is free to this manager at
/// once: `try_lock` and a zero-timeout `acquire` take it.
#[doc(hidden)]
pub async fn dropped_key_is_free_to_the_same_manager_at_once<L: Conformant>(
    lock: &L,
    _observer: &L,
) {
    let k = key("drop-retake");
    for round in 0..ROUNDS {
        drop(lock.acquire(&k, None).await.unwrap());
        let again = lock.try_lock(&k).await.unwrap();
        assert!(
            again.is_some(),
            "round {round}: try_lock right after a drop found the key held"
        );
        drop(again);
        let again = lock.acquire(&k, Some(Duration::ZERO)).await;
        assert!(
            again.is_ok(),
            "round {round}: a zero-timeout acquire after a drop: {again:?}",
            again = again.err()
        );
    }
}
