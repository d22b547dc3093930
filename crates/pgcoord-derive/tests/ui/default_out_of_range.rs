use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    #[column(default = 300)]
    small: u8,
}

fn main() {}
