use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    meta: ReadModelMeta,
    customer: String,
    #[serde(flatten)]
    previous: ReadModelMeta,
}

fn main() {}
