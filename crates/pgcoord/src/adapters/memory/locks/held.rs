//! [`Held`] as a guard's backend: releasing, turning manual, downgrading.

use super::Held;
use crate::ports::error::{LockLostError, Result};
use crate::ports::locks::{BoxFuture, GuardBackend};
use crate::ports::shared_locks::LockMode;

impl GuardBackend for Held {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        let lost = !self.inner.holds(self.lock_id, self.token);
        let key = self.info.key.clone();
        drop(self);
        Box::pin(async move {
            if lost {
                Err(lost_error(key.to_string()))
            } else {
                Ok(())
            }
        })
    }

    fn into_manual(self: Box<Self>) {
        let inner = self.inner.clone();
        let mut state = inner.lock();
        state.manual.insert(self.token, *self);
    }

    fn downgrade(mut self: Box<Self>) -> BoxFuture<'static, Result<Box<dyn GuardBackend>>> {
        let outcome = if self.inner.downgrade(self.lock_id, self.token) {
            self.info.mode = LockMode::Shared;
            Ok(self as Box<dyn GuardBackend>)
        } else {
            Err(lost_error(self.info.key.to_string()))
        };
        Box::pin(std::future::ready(outcome))
    }
}

fn lost_error(key: String) -> crate::Error {
    LockLostError {
        key,
        reason: "released by release_all or a simulated loss".into(),
    }
    .into()
}
