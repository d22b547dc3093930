//! The loss cases of the lock and shared-lock suites fail an
//! implementation that breaks what they check: each test runs one case
//! against a deliberately broken wrapper of the in-memory manager and
//! expects that case to fail.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgcoord::backend::{BoxFuture, GuardBackend};
use pgcoord::error::LockLostError;
use pgcoord::tokio_util::sync::CancellationToken;
use pgcoord::{
    DistributedLock, Error, InMemoryLockManager, LockGuard, LockRegistry, LossSignal, Result,
    SharedLock,
};
use pgcoord_testkit::{hang_guard, locks};

#[derive(Clone, Copy)]
enum Flaw {
    /// Guards carry a signal that never fires.
    NeverLoses,
    /// Giving a manual lock back (by key or `release_all`) fires its signal
    /// too (signals otherwise fire on `release_all` as they should).
    ManualReleaseFires,
    /// A guard whose lock is gone is downgraded all the same.
    DowngradeIgnoresLoss,
}

#[derive(Clone)]
struct Broken {
    inner: InMemoryLockManager,
    flaw: Flaw,
    /// The signal of each lock held, guarded or manual, by key.
    signals: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl Broken {
    fn new(flaw: Flaw) -> Self {
        let inner = InMemoryLockManager::new(None);
        let signals = Arc::default();
        Self {
            inner,
            flaw,
            signals,
        }
    }

    /// Keeps `guard`'s lock as a manual lock of `inner`, behind a guard
    /// with the flawed signal.
    fn wrap(&self, guard: LockGuard) -> LockGuard {
        let token = CancellationToken::new();
        let loss = match self.flaw {
            Flaw::NeverLoses => LossSignal::never(),
            Flaw::ManualReleaseFires | Flaw::DowngradeIgnoresLoss => {
                LossSignal::from_token(token.clone())
            }
        };
        let info = guard.into_manual();
        let mut signals = self.signals.lock().unwrap();
        signals.insert(info.key.to_string(), token);
        let backend = Backend {
            owner: self.clone(),
            key: info.key.to_string(),
            done: false,
        };
        LockGuard::new(info, loss, Box::new(backend))
    }

    /// Fires (and forgets) the signal of `key`, or of every lock.
    fn fire(&self, key: Option<&str>) {
        let mut signals = self.signals.lock().unwrap();
        signals.retain(|k, token| {
            let hit = key.is_none_or(|key| key == k);
            if hit {
                token.cancel();
            }
            !hit
        });
    }
}

struct Backend {
    owner: Broken,
    key: String,
    done: bool,
}

impl GuardBackend for Backend {
    fn release(mut self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        self.done = true;
        self.owner.signals.lock().unwrap().remove(&self.key);
        let (inner, key) = (self.owner.inner.clone(), self.key.clone());
        Box::pin(async move {
            let reason = "given back by release_all".into();
            inner
                .release(&key)
                .await
                .map_err(|e| match e.is_not_held() {
                    true => Error::LockLost(LockLostError { key, reason }),
                    false => e,
                })
        })
    }

    fn into_manual(mut self: Box<Self>) {
        self.done = true;
    }

    /// Keeps the hold as it is (the wrapper has no real downgrade): enough
    /// for the case, which downgrades a lost lock.
    fn downgrade(self: Box<Self>) -> BoxFuture<'static, Result<Box<dyn GuardBackend>>> {
        let lost = !self.owner.inner.is_held(&self.key);
        let outcome = match self.owner.flaw {
            Flaw::DowngradeIgnoresLoss => Ok(self as Box<dyn GuardBackend>),
            _ if lost => {
                let (key, reason) = (self.key.clone(), "taken by release_all".into());
                Err(Error::LockLost(LockLostError { key, reason }))
            }
            _ => Ok(self as Box<dyn GuardBackend>),
        };
        Box::pin(std::future::ready(outcome))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if !self.done {
            self.owner.signals.lock().unwrap().remove(&self.key);
            // The in-memory manager releases when `release` is called.
            drop(self.owner.inner.release(&self.key));
        }
    }
}

impl DistributedLock for Broken {
    async fn acquire(&self, key: &str, timeout: Option<Duration>) -> Result<LockGuard> {
        Ok(self.wrap(self.inner.acquire(key, timeout).await?))
    }

    fn release<'a>(&'a self, key: &'a str) -> impl Future<Output = Result<()>> + Send + 'a {
        self.fire(Some(key));
        self.inner.release(key)
    }

    fn is_held(&self, key: &str) -> bool {
        self.inner.is_held(key)
    }

    fn fences(&self) -> bool {
        self.inner.fences()
    }
}

impl SharedLock for Broken {
    async fn acquire_shared(&self, key: &str, timeout: Option<Duration>) -> Result<LockGuard> {
        Ok(self.wrap(self.inner.acquire_shared(key, timeout).await?))
    }
}

impl LockRegistry for Broken {
    fn release_all(&self) -> impl Future<Output = Result<usize>> + Send {
        self.fire(None);
        self.inner.release_all()
    }

    fn held_lock_count(&self) -> usize {
        self.inner.held_lock_count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "the loss was never signalled")]
async fn a_guard_that_never_sees_release_all_fails() {
    let lock = Broken::new(Flaw::NeverLoses);
    locks::release_all_makes_a_live_guard_lost(&lock, &lock.clone()).await;
}

/// The case waits for work that a never-firing signal never stops; the
/// short limit only stands in for the macro's [`hang_guard::CASE_LIMIT`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "hung")]
async fn with_lock_work_that_a_loss_never_stops_fails() {
    let lock = Broken::new(Flaw::NeverLoses);
    let case = locks::with_lock_stops_the_work_when_the_lock_is_lost(&lock, &lock);
    hang_guard::within("with_lock", Duration::from_secs(2), case).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "fired a manual lock's signal")]
async fn a_manual_lock_whose_release_fires_its_signal_fails() {
    let lock = Broken::new(Flaw::ManualReleaseFires);
    locks::releasing_a_manual_lock_fires_no_signal(&lock, &lock.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "a lock taken by release_all was downgraded")]
async fn a_downgrade_that_ignores_a_loss_fails() {
    let lock = Broken::new(Flaw::DowngradeIgnoresLoss);
    locks::downgrade_of_a_lost_lock_is_lock_lost(&lock, &lock.clone()).await;
}

/// The control: the same wrapper without a flaw in play passes the cases
/// that do not touch it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrapper_passes_where_its_flaw_is_not_in_play() {
    let lock = Broken::new(Flaw::ManualReleaseFires);
    locks::release_all_makes_a_live_guard_lost(&lock, &lock.clone()).await;
    locks::with_lock_stops_the_work_when_the_lock_is_lost(&lock, &lock.clone()).await;
    let lock = Broken::new(Flaw::NeverLoses);
    locks::releasing_a_manual_lock_fires_no_signal(&lock, &lock.clone()).await;
    locks::downgrade_of_a_lost_lock_is_lock_lost(&lock, &lock.clone()).await;
}
