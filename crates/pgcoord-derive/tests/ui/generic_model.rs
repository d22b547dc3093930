use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order<T> {
    #[serde(flatten)]
    meta: ReadModelMeta,
    customer: T,
}

fn main() {}
