use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
#[column(rename = "orders")]
struct Order {
    #[serde(flatten)]
    meta: ReadModelMeta,
    customer: String,
}

fn main() {}
