//! `lock run --permits N`: KEY names a semaphore of N permits
//! (`pgcoord::coordination::Semaphore`) and COMMAND runs holding one.
//! The rest of `lock run` sees the permit's slot lock as its lock.

use std::time::Duration;

use pgcoord::coordination::{Semaphore, SemaphorePermit};
use pgcoord::PostgresLockManager;
use pgcoord::{error::AcquireFailure, Error, LockGuard};

use crate::duration::format_duration;

/// The environment variable that tells COMMAND which permit it holds.
pub const PERMIT_ENV: &str = "EVENTSOURCE_LOCK_PERMIT";

/// Takes one of `permits` permits of semaphore `name`.
///
/// # Cancel safety
///
/// As [`Semaphore::acquire`]: leaks nothing when dropped; a dropped wait
/// loses its place in the queue.
pub async fn acquire(
    manager: &PostgresLockManager,
    name: &str,
    permits: u32,
    timeout: Option<Duration>,
) -> Result<LockGuard, Error> {
    let semaphore = Semaphore::new(manager.clone(), name, permits)?;
    semaphore
        .acquire(timeout)
        .await
        .map(SemaphorePermit::into_guard)
}

/// The permit (slot number) a guard of semaphore `name` holds.
pub fn slot_of(name: &str, guard_key: &str) -> Option<u32> {
    guard_key
        .strip_prefix(name)?
        .strip_prefix("#permit/")?
        .parse()
        .ok()
}

/// The one line saying why no permit was taken, for a conflict or a
/// permit-count mismatch; `None` for other failures.
pub fn not_acquired(
    name: &str,
    permits: u32,
    timeout: Option<Duration>,
    e: &Error,
) -> Option<String> {
    let failure = &e.as_lock_acquisition()?.reason;
    let why = match (failure, timeout) {
        (AcquireFailure::PermitCountMismatch { .. }, _) => {
            return Some(format!(
                "semaphore {name:?} not acquired: another holder uses more than --permits \
                 {permits} (it holds permit {permits}); every user of one semaphore must pass the \
                 same --permits; the command was not run"
            ))
        }
        (AcquireFailure::Timeout, Some(t)) if t.is_zero() => {
            "all are held elsewhere (--no-wait)".to_owned()
        }
        (AcquireFailure::Timeout, Some(t)) => {
            format!("all were still held elsewhere after {}", format_duration(t))
        }
        (AcquireFailure::Timeout, None) => "all are held elsewhere".to_owned(),
        _ => return None,
    };
    Some(format!(
        "semaphore {name:?} not acquired: {why} ({permits} permit{}); the command was not run",
        if permits == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_is_read_back_from_the_permit_key() {
        let key = Semaphore::<PostgresLockManager>::slot_key("nightly", 3);
        assert_eq!(slot_of("nightly", &key), Some(3));
        assert_eq!(slot_of("other", &key), None);
        assert_eq!(slot_of("nightly", "nightly"), None);
    }
}
