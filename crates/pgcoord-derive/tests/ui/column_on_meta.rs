use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[column(rename = "zzz")]
    meta: ReadModelMeta,
    name: String,
}

fn main() {}
