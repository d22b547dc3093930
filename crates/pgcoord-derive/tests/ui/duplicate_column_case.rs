use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    name: String,
    #[column(rename = "Name")]
    display_name: String,
}

fn main() {}
