//! The reader side of the book: shared holds, each on a dedicated session.

use std::sync::Arc;

use super::{Holdings, Reader};
use crate::adapters::postgres::locks::held_lock::SessionRef;
use crate::adapters::postgres::locks::hold_token::HoldToken;
use crate::ports::alarm::Alarm;

impl Holdings {
    /// Records a shared (reader) grant on `session`; returns its token.
    pub(crate) fn grant_reader(
        &self,
        lock_id: i64,
        key: &Arc<str>,
        session: &SessionRef,
        at: std::time::Instant,
        loss: Arc<Alarm>,
    ) -> HoldToken {
        let hold = self.hold(session, at, loss);
        let mut state = self.lock();
        let serial = state.serial();
        let key = key.clone();
        state.readers.insert(serial, Reader { lock_id, key, hold });
        HoldToken::Reader(serial)
    }

    /// How many reader holds there are now.
    pub(crate) fn readers_held(&self) -> usize {
        self.lock().readers.len()
    }
}
