//! The model, events and handler the runner tests share.
#![allow(dead_code)]

use std::sync::Mutex;
use std::time::Duration;

use pgcoord::readmodels::{
    FieldDescriptor, FieldType, Query, ReadModel, ReadModelHandler, ReadModelMeta,
    ReadModelRepository,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One row per event applied; applying an event twice bumps its version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Seen {
    #[serde(flatten)]
    pub meta: ReadModelMeta,
    pub position: i64,
    pub text: String,
}

impl ReadModel for Seen {
    const TABLE_NAME: Option<&'static str> = Some("seen");
    fn fields() -> Vec<FieldDescriptor> {
        vec![
            FieldDescriptor::new("position", FieldType::Integer),
            FieldDescriptor::new("text", FieldType::Text),
        ]
    }
    fn meta(&self) -> &ReadModelMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ReadModelMeta {
        &mut self.meta
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ev {
    pub n: i64,
    pub text: String,
}

pub fn ev(n: i64) -> Ev {
    Ev {
        n,
        text: format!("event {n}"),
    }
}

pub fn id_of(n: i64) -> Uuid {
    Uuid::from_u64_pair(0x5EE7, n as u64)
}

/// Writes (or, applied again, re-writes with a higher version) the row of
/// each event, and remembers the order it saw them in.
#[derive(Default)]
pub struct Recorder {
    pub order: Mutex<Vec<i64>>,
    pub delay: Duration,
}

impl ReadModelHandler for Recorder {
    type Model = Seen;
    type Event = Ev;

    async fn handle<R: ReadModelRepository<Seen>>(
        &self,
        event: &Ev,
        repo: &R,
    ) -> pgcoord::Result<()> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await; // workload, to widen the batch a kill lands in
        }
        let row = match repo.get(id_of(event.n)).await? {
            Some(mut seen) => {
                seen.text.push_str(" (again)");
                seen
            }
            None => Seen {
                meta: ReadModelMeta::new(id_of(event.n)),
                position: event.n,
                text: event.text.clone(),
            },
        };
        repo.save(&row).await?;
        self.order.lock().unwrap().push(event.n);
        Ok(())
    }
}

/// Every event 1..=n applied exactly once: n rows, each at version 1.
pub async fn assert_each_applied_once<R: ReadModelRepository<Seen>>(repo: &R, n: i64) {
    let mut rows = repo.find(&Query::new()).await.unwrap();
    rows.sort_by_key(|r| r.position);
    let positions: Vec<i64> = rows.iter().map(|r| r.position).collect();
    assert_eq!(
        positions,
        (1..=n).collect::<Vec<_>>(),
        "an event skipped or foreign"
    );
    let twice: Vec<i64> = rows
        .iter()
        .filter(|r| r.meta.version != 1)
        .map(|r| r.position)
        .collect();
    assert!(twice.is_empty(), "applied more than once: {twice:?}");
}

/// A [`Recorder`] whose handler fails: always on the `poison` events
/// (until cured), and `flaky` times on an event with an error the
/// [`transient_in_test`] classifier calls transient. Counts attempts.
#[derive(Default)]
pub struct Picky {
    pub inner: Recorder,
    pub poison: Mutex<std::collections::HashSet<i64>>,
    pub poison_every: Option<i64>,
    pub flaky: Mutex<std::collections::HashMap<i64, u32>>,
    pub attempts: Mutex<std::collections::HashMap<i64, u32>>,
    /// At this event the handler says so on the channel, then never
    /// finishes (for a caller to drop the call).
    pub stall_at: Mutex<Option<(i64, tokio::sync::oneshot::Sender<()>)>>,
}

impl Picky {
    pub fn poisoned(events: &[i64]) -> Self {
        Self {
            poison: Mutex::new(events.iter().copied().collect()),
            ..Self::default()
        }
    }

    pub fn cure(&self) {
        self.poison.lock().unwrap().clear();
    }

    pub fn attempts_at(&self, n: i64) -> u32 {
        self.attempts.lock().unwrap().get(&n).copied().unwrap_or(0)
    }
}

/// The classifier of the tests: an error saying "transient" is.
pub fn transient_in_test(e: &pgcoord::Error) -> bool {
    e.to_string().contains("transient")
}

impl ReadModelHandler for Picky {
    type Model = Seen;
    type Event = Ev;

    async fn handle<R: ReadModelRepository<Seen>>(
        &self,
        event: &Ev,
        repo: &R,
    ) -> pgcoord::Result<()> {
        *self.attempts.lock().unwrap().entry(event.n).or_default() += 1;
        let stall = {
            let mut at = self.stall_at.lock().unwrap();
            match at.take() {
                Some((n, tx)) if n == event.n => Some(tx),
                other => {
                    *at = other;
                    None
                }
            }
        };
        if let Some(tx) = stall {
            let _ = tx.send(());
            std::future::pending::<()>().await;
        }
        let poisoned = self.poison.lock().unwrap().contains(&event.n)
            || self.poison_every.is_some_and(|k| event.n % k == 0);
        if poisoned {
            return Err(pgcoord::Error::InvalidArgument(format!(
                "poison {}",
                event.n
            )));
        }
        if let Some(left) = self.flaky.lock().unwrap().get_mut(&event.n) {
            if *left > 0 {
                *left -= 1;
                return Err(pgcoord::Error::InvalidArgument(format!(
                    "transient {}",
                    event.n
                )));
            }
        }
        self.inner.handle(event, repo).await
    }
}

/// Rows of exactly `positions`, each written once.
pub async fn assert_applied_once<R: ReadModelRepository<Seen>>(repo: &R, positions: &[i64]) {
    let mut rows = repo.find(&Query::new()).await.unwrap();
    rows.sort_by_key(|r| r.position);
    let got: Vec<i64> = rows.iter().map(|r| r.position).collect();
    assert_eq!(got, positions, "applied events");
    let twice: Vec<i64> = rows
        .iter()
        .filter(|r| r.meta.version != 1)
        .map(|r| r.position)
        .collect();
    assert!(twice.is_empty(), "applied more than once: {twice:?}");
}
