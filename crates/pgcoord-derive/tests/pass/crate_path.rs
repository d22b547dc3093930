// `#[read_model(crate = "...")]`: the generated code names the crate
// through the given path, here a re-export as a renamed dependency or a
// facade crate would give it.
mod facade {
    pub use ::pgcoord::*;
}

use facade::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
#[read_model(crate = "crate::facade", table = "orders", index(status))]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    status: String,
    total: Option<i64>,
}

fn main() {
    assert_eq!(Order::TABLE_NAME, Some("orders"));
    assert_eq!(Order::fields().len(), 2);
    let _ = Order::STATUS;
}
