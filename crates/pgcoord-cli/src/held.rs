//! What `lock run` holds while COMMAND runs: one lock (KEY, or a permit of
//! semaphore KEY), or a set of keys taken at once (`--also`), seen the same
//! way by the rest of the run: one loss signal, one release.

use pgcoord::coordination::MultiLockGuard;
use pgcoord::{LockGuard, LossSignal};

/// The lock, or locks, a run holds.
#[derive(Debug)]
pub enum Held {
    /// KEY alone, or one permit of semaphore KEY.
    One(LockGuard),
    /// KEY and every `--also` key, taken all or none.
    Set(MultiLockGuard),
}

impl Held {
    /// The guard that stands for KEY: the one lock, or in a set the member
    /// with KEY's lock id (the set keeps one member per id).
    pub fn key_guard(&self, key: &str) -> &LockGuard {
        match self {
            Held::One(guard) => guard,
            Held::Set(set) => {
                let id = pgcoord::lock_id_for_key(key);
                set.guards()
                    .iter()
                    .find(|g| g.lock_id() == id)
                    .expect("the set holds KEY")
            }
        }
    }

    /// True once any lock held has been lost.
    pub fn is_lost(&self) -> bool {
        match self {
            Held::One(guard) => guard.is_lost(),
            Held::Set(set) => set.is_lost(),
        }
    }

    /// Fires as soon as any lock held is lost.
    pub fn loss_signal(&self) -> LossSignal {
        match self {
            Held::One(guard) => guard.loss_signal(),
            Held::Set(set) => set.loss_signal(),
        }
    }

    /// How messages name what was lost: `what` (as [`crate::multi::describe`]
    /// named the run's keys) for one lock; for a set, the lost members and
    /// the set, e.g. `lock "b" (one of locks "a" and "b")`.
    pub fn lost_name(&self, what: &str) -> String {
        let Held::Set(set) = self else {
            return what.to_owned();
        };
        let lost: Vec<&str> = set
            .guards()
            .iter()
            .filter(|g| g.is_lost())
            .map(LockGuard::key)
            .collect();
        // Said with "was lost": "each of" keeps the verb singular.
        match lost.as_slice() {
            [] => what.to_owned(),
            [one] => format!("lock {one:?} (one of {what})"),
            all if all.len() == set.guards().len() => format!("each of {what}"),
            many => format!("each of {} (of {what})", crate::multi::describe(many)),
        }
    }

    /// Releases everything held; the first failure is returned (a lost
    /// lock gives [`pgcoord::Error::LockLost`]).
    ///
    /// # Cancel safety
    ///
    /// As [`LockGuard::release`] and [`MultiLockGuard::release`]: dropped,
    /// the releases still happen in the background.
    pub async fn release(self) -> pgcoord::Result<()> {
        match self {
            Held::One(guard) => guard.release().await,
            Held::Set(set) => set.release().await,
        }
    }
}
