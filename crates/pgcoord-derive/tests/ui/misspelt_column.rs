use pgcoord::readmodels::{Filter, ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    status: String,
}

fn main() {
    let _ = Filter::eq(Order::STATUSS, "open");
}
