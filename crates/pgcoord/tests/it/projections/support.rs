//! The model, events and handler the runner tests share.
#![allow(dead_code)]

use std::sync::Mutex;
use std::time::Duration;

use pgcoord::ports::readmodels::{
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
