use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    // Option<T> is checked as T.
    #[column(default = "5")]
    quantity: Option<i64>,
}

fn main() {}
