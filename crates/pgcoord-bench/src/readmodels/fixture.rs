//! The read model the repository scenarios read and write (`Order`, table
//! `bench_orders`), how its rows are made, how many there are, the
//! `save_many` batch size and the column list the raw baselines select;
//! and the events the catch-up scenarios feed.

use pgcoord::readmodels::{ReadModel, ReadModelMeta};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Rows in `bench_orders` before a round starts.
pub(super) const ROWS: usize = 2_000;
/// Rows per `save_many` call (and per raw multi-row upsert).
pub(super) const BATCH: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize, ReadModel)]
#[read_model(table = "bench_orders", index(status))]
pub(super) struct Order {
    #[serde(flatten)]
    pub(super) meta: ReadModelMeta,
    pub(super) customer: String,
    pub(super) status: String,
    pub(super) total_cents: i64,
    pub(super) note: Option<String>,
}

/// The `i`th row: one of four statuses, a note on every third.
pub(super) fn order(i: usize) -> Order {
    Order {
        meta: ReadModelMeta::new_random(),
        customer: format!("customer-{i}"),
        status: ["open", "paid", "shipped", "closed"][i % 4].to_owned(),
        total_cents: (i * 37 % 10_000) as i64,
        note: i.is_multiple_of(3).then(|| format!("note {i}")),
    }
}

/// The columns of `bench_orders`, in the order the raw baselines decode.
pub(super) const COLS: &str =
    "id, created_at, updated_at, version, deleted_at, customer, status, total_cents, note";

/// `events` events at positions 1, 2, ..., each adding 1 to one of 100
/// tallies in turn.
pub(super) fn feed(events: usize) -> Vec<(i64, (Uuid, i64))> {
    let ids: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
    (0..events)
        .map(|i| ((i + 1) as i64, (ids[i % 100], 1)))
        .collect()
}
