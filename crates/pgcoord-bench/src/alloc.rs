//! A counting global allocator: live bytes and allocation calls.
//!
//! Used by `capacity` (client bytes per held lock, more precise than RSS)
//! and to report allocations per operation.
//!
//! Each thread counts into a stripe of its own (one cache line set per
//! thread, written with plain loads and stores), and a reader sums the
//! stripes. Counters that every thread shared cost ours about 0.7 µs of
//! client CPU a pair at 1,024 tasks on a 2-core VM (six contended atomic
//! adds per allocation and free, the cache lines bouncing between the two
//! worker threads), where `raw_batched` allocates nothing and paid none of
//! it: the instrument itself slowed the side that allocates. Threads past
//! [`OWNED`] share one last stripe, with atomic adds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

pub struct Counting;

/// Live bytes by size class: class `c` holds the blocks of `2^(c-1) < size <= 2^c`
/// bytes (class 0: empty), so `capacity` can say which allocations grew.
const CLASSES: usize = 64;

/// Threads that get a stripe of their own; later ones share the last.
const OWNED: usize = 63;

/// One thread's counts. Live bytes may go negative in a stripe (a block
/// freed by another thread than the one that took it); the sums are right.
#[repr(align(128))]
struct Stripe {
    live: AtomicI64,
    allocs: AtomicI64,
    bytes: AtomicI64,
    live_by_class: [AtomicI64; CLASSES],
}

impl Stripe {
    const fn new() -> Self {
        Self {
            live: AtomicI64::new(0),
            allocs: AtomicI64::new(0),
            bytes: AtomicI64::new(0),
            live_by_class: [const { AtomicI64::new(0) }; CLASSES],
        }
    }
}

static STRIPES: [Stripe; OWNED + 1] = [const { Stripe::new() }; OWNED + 1];
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, `usize::MAX` until its first allocation.
    static MY_STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Adds `v` to `counter` of the calling thread's stripe: a plain load and
/// store when the stripe is the thread's own (no other thread writes it),
/// an atomic add in the shared one.
#[inline]
fn add(stripe: usize, counter: &AtomicI64, v: i64) {
    if stripe < OWNED {
        counter.store(counter.load(Ordering::Relaxed) + v, Ordering::Relaxed);
    } else {
        counter.fetch_add(v, Ordering::Relaxed);
    }
}

#[inline]
fn my_stripe() -> usize {
    MY_STRIPE
        .try_with(|slot| {
            if slot.get() == usize::MAX {
                let n = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed).min(OWNED);
                slot.set(n);
            }
            slot.get()
        })
        .unwrap_or(OWNED)
}

#[inline]
fn class(size: usize) -> usize {
    (usize::BITS - size.saturating_sub(1).leading_zeros()) as usize % CLASSES
}

#[inline]
fn count(size: usize, grown: i64, calls: i64) {
    let i = my_stripe();
    let s = &STRIPES[i];
    add(i, &s.live, grown);
    add(i, &s.live_by_class[class(size)], size as i64);
    if calls > 0 {
        add(i, &s.allocs, calls);
        add(i, &s.bytes, size as i64);
    }
}

#[inline]
fn count_free(size: usize) {
    let i = my_stripe();
    let s = &STRIPES[i];
    add(i, &s.live, -(size as i64));
    add(i, &s.live_by_class[class(size)], -(size as i64));
}

// SAFETY: forwards every call to the system allocator unchanged; only counts
// (into statics and a const-initialised thread-local without destructor,
// so counting never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            count(layout.size(), layout.size() as i64, 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            count(layout.size(), layout.size() as i64, 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        count_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            count_free(layout.size());
            count(new_size, new_size as i64, 1);
        }
        p
    }
}

fn sum(field: impl Fn(&Stripe) -> &AtomicI64) -> i64 {
    STRIPES
        .iter()
        .map(|s| field(s).load(Ordering::Relaxed))
        .sum()
}

/// Bytes currently allocated on the heap by this process (through Rust).
pub fn live_bytes() -> i64 {
    sum(|s| &s.live)
}

/// Live heap bytes per size class (see [`CLASSES`]), as (largest block
/// size of the class, bytes).
pub fn live_by_class() -> Vec<(u64, i64)> {
    (0..CLASSES)
        .map(|c| {
            (
                1u64.checked_shl(c as u32).unwrap_or(u64::MAX),
                sum(|s| &s.live_by_class[c]),
            )
        })
        .collect()
}

/// (allocation calls, bytes requested) since start.
pub fn totals() -> (u64, u64) {
    (sum(|s| &s.allocs) as u64, sum(|s| &s.bytes) as u64)
}

/// Resident set size from /proc/self/statm, in bytes (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// CPU time (user + system) of process `pid` (`None`: this process) from
/// /proc/PID/stat, in nanoseconds; `None` where unreadable (e.g. a remote server).
pub fn cpu_ns(pid: Option<i32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name start with field 3 (state).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on Linux.
    Some((utime + stime) * 10_000_000)
}

/// The machine's 1-minute load average from /proc/loadavg (None where
/// unreadable): the coordination scenarios report it, their tails follow it.
pub fn load_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_many_threads_add_up() {
        let (a0, _) = totals();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    let v: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
                    v
                })
            })
            .collect();
        let kept: Vec<Vec<Box<u64>>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let (a1, _) = totals();
        // 8 threads of 1,000 boxes and their vectors (other tests may
        // allocate at the same time, so at least).
        assert!(a1 - a0 >= 8 * 1000, "{a0} -> {a1}");
        drop(kept);
    }
}
