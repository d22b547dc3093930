use pgcoord::readmodels::{ReadModel, ReadModelMeta};

// The path is used, not ignored: a wrong one fails to resolve.
#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
#[read_model(crate = "not_pgcoord")]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    status: String,
}

fn main() {}
