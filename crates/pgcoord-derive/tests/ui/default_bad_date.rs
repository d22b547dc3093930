use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    #[column(default = "2023-02-29")]
    due: Option<chrono::NaiveDate>,
}

fn main() {}
