//! [`SessionEnd`]: the alarm a lock session raises when it ends, and why
//! it ended, when that is known.
//!
//! Every loss signal of a session's locks watches one of these, so a
//! holder can say more than "the session ended": that the server
//! terminated it (with the server's own words and SQLSTATE), that it
//! stopped answering, that its connection timed out. One per session, not
//! one per lock: the reason costs a held lock nothing.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use super::alarm::Alarm;

/// A session's end alarm, with the first reason recorded for it.
#[derive(Debug, Default)]
pub(crate) struct SessionEnd {
    alarm: Alarm,
    why: OnceLock<Box<str>>,
}

impl SessionEnd {
    /// A session that has not ended, to be shared.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records why the session ended, unless a reason was recorded first
    /// (the first is the cause; what follows is its consequence), without
    /// raising the alarm.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn note_why(&self, why: impl Into<Box<str>>) {
        let _ = self.why.set(why.into());
    }

    /// Records why (as [`note_why`](Self::note_why)) and raises the alarm.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn raise_because(&self, why: impl Into<Box<str>>) {
        self.note_why(why);
        self.alarm.raise();
    }

    /// Why the session ended, once it has and the reason is known.
    pub(crate) fn why(&self) -> Option<&str> {
        if self.alarm.is_raised() {
            self.why.get().map(|w| &**w)
        } else {
            None
        }
    }
}

impl Deref for SessionEnd {
    type Target = Alarm;

    fn deref(&self) -> &Alarm {
        &self.alarm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_kept_and_shown_only_once_raised() {
        let end = SessionEnd::new();
        end.note_why("the server ended it");
        assert_eq!(end.why(), None, "not ended yet");
        end.raise_because("its liveness check failed");
        assert!(end.is_raised());
        assert_eq!(end.why(), Some("the server ended it"));
        let plain = SessionEnd::new();
        plain.raise();
        assert_eq!(plain.why(), None);
    }
}
