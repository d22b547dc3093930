//! Two holders contending for one key through a stock PgBouncer in
//! transaction mode, each take on fresh managers (as `eventsource lock
//! run` processes do). Exclusion cannot hold there: the pooler closes a
//! server connection, and the lock on it, whenever a client leaves it in
//! the middle of a statement ("client disconnect while server was not
//! ready"), and tells no other client; and it loses answers to pipelined
//! statements ("got packet 'Z' from server when not linked"). What the
//! manager promises is that no holder is left believing it held the key
//! throughout when another held it meanwhile: of two takes that overlap,
//! at least one is told, by its loss signal or by a release that does not
//! succeed. A release that succeeds ran on the live server process the
//! lock was granted on, where the lock still was: held the whole time.
//!
//! Skipped without the `pgbouncer` binary unless
//! `EVENTSOURCE_REQUIRE_PGBOUNCER=1` (CI sets it).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgcoord::DistributedLock;

use crate::pgbouncer_stock::{behind_pgbouncer, manager_via};

/// Takes per holder.
const TAKES: usize = 40;

/// One granted take: when it began and ended (on one counter shared by
/// both holders), and whether its holder was told the lock might be gone.
#[derive(Debug)]
struct Take {
    holder: usize,
    began: usize,
    ended: usize,
    told: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_holders_through_a_transaction_pooler_never_overlap_untold() {
    let Some((bouncer, url, _db)) = behind_pgbouncer("transaction").await else {
        return;
    };
    let key = format!("bouncer-pipelining:{}", uuid::Uuid::new_v4());
    let clock = Arc::new(AtomicUsize::new(0));
    let takes = Arc::new(Mutex::new(Vec::new()));
    let holders = (0..2).map(|holder| {
        let (url, key) = (url.clone(), key.clone());
        let (clock, takes) = (clock.clone(), takes.clone());
        tokio::spawn(async move {
            for take in 0..TAKES {
                let m = manager_via(&url, &format!("pipelining-{holder}-{take}"));
                if let Ok(guard) = m.acquire(&key, Some(Duration::from_secs(5))).await {
                    let began = clock.fetch_add(1, Ordering::SeqCst);
                    // The critical section: long enough for the other
                    // holder's take to meet it.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    let ended = clock.fetch_add(1, Ordering::SeqCst);
                    let lost = guard.is_lost();
                    let released = guard.release().await.is_ok();
                    takes.lock().unwrap().push(Take {
                        holder,
                        began,
                        ended,
                        told: lost || !released,
                    });
                }
                m.close().await.ok();
            }
        })
    });
    for h in holders.collect::<Vec<_>>() {
        h.await.unwrap();
    }
    let takes = takes.lock().unwrap();
    println!(
        "{} of {} takes granted through the pooler, {} of them told of a possible loss",
        takes.len(),
        2 * TAKES,
        takes.iter().filter(|t| t.told).count()
    );
    for a in takes.iter().filter(|t| t.holder == 0) {
        for b in takes.iter().filter(|t| t.holder == 1) {
            let overlap = a.began < b.ended && b.began < a.ended;
            assert!(
                !overlap || a.told || b.told,
                "two holders at once and neither was told: {a:?} {b:?}\n{}",
                bouncer.log()
            );
        }
    }
}
