use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
#[read_model(table = "")]
struct OrderSummary {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    status: String,
}

fn main() {}
