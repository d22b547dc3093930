//! Deadlines from the timeouts callers give.
//!
//! One rule for every call that takes a timeout: a deadline the clock
//! cannot hold (`Some(Duration::MAX)`, or any timeout that would put it
//! past the latest [`Instant`]) is no deadline, so the call waits as long
//! as it takes, as with `None`. `Instant + Duration` panics on that
//! overflow instead, so deadlines are made here, never with `+`.

use std::time::Duration;

use tokio::time::Instant;

/// `wait` after `start`; `None` (no deadline: wait as long as it takes)
/// when that is beyond what the clock can hold.
pub(crate) fn deadline_after(start: Instant, wait: Duration) -> Option<Instant> {
    start.checked_add(wait)
}

/// The deadline of a call made now with `timeout`: `None` without one,
/// or with one too long for the clock ([`deadline_after`]).
pub(crate) fn deadline_in(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| deadline_after(Instant::now(), t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_too_long_for_the_clock_is_no_deadline() {
        assert_eq!(deadline_in(None), None);
        assert_eq!(deadline_in(Some(Duration::MAX)), None);
        let start = Instant::now();
        assert_eq!(deadline_after(start, Duration::MAX), None);
        let hour = Duration::from_secs(3600);
        assert_eq!(deadline_after(start, hour), Some(start + hour));
        assert!(deadline_in(Some(hour)).is_some_and(|d| d > start));
    }
}
