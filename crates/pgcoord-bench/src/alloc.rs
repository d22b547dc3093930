//! A counting global allocator: live bytes and allocation calls.
//!
//! Used by `capacity` (client bytes per held lock, more precise than RSS)
//! and to report allocations per operation. Two relaxed atomic adds per
//! allocation: the same small overhead for every scenario.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

pub struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static ALLOC_BYTES: AtomicU64 = AtomicU64::new(0);
/// Live bytes by size class: class `c` holds the blocks of `2^(c-1) < size <= 2^c`
/// bytes (class 0: empty), so `capacity` can say which allocations grew.
static LIVE_BY_CLASS: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];
const CLASSES: usize = 64;

#[inline]
fn class(size: usize) -> usize {
    (usize::BITS - size.saturating_sub(1).leading_zeros()) as usize % CLASSES
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        LIVE_BY_CLASS[class(layout.size())].fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
            LIVE_BY_CLASS[class(layout.size())].fetch_sub(layout.size() as i64, Ordering::Relaxed);
            LIVE_BY_CLASS[class(new_size)].fetch_add(new_size as i64, Ordering::Relaxed);
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            ALLOC_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        p
    }
}

#[inline]
fn count_alloc(size: usize) {
    LIVE_BYTES.fetch_add(size as i64, Ordering::Relaxed);
    LIVE_BY_CLASS[class(size)].fetch_add(size as i64, Ordering::Relaxed);
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    ALLOC_BYTES.fetch_add(size as u64, Ordering::Relaxed);
}

/// Bytes currently allocated on the heap by this process (through Rust).
pub fn live_bytes() -> i64 {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Live heap bytes per size class (see [`LIVE_BY_CLASS`]), as (largest
/// block size of the class, bytes).
pub fn live_by_class() -> Vec<(u64, i64)> {
    LIVE_BY_CLASS
        .iter()
        .enumerate()
        .map(|(c, b)| {
            (
                1u64.checked_shl(c as u32).unwrap_or(u64::MAX),
                b.load(Ordering::Relaxed),
            )
        })
        .collect()
}

/// (allocation calls, bytes requested) since start.
pub fn totals() -> (u64, u64) {
    (
        ALLOCS.load(Ordering::Relaxed),
        ALLOC_BYTES.load(Ordering::Relaxed),
    )
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
