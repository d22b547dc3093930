use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct NoDefault(u8);

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    meta: ReadModelMeta,
    #[column(skip)]
    cached: NoDefault,
}

fn main() {}
