use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    #[column(default = "2026-01-01 00:00:00")]
    placed: Option<chrono::DateTime<chrono::Utc>>,
    #[column(default = "2026-01-01T00:00:00Z")]
    shipped: Option<chrono::DateTime<chrono::Utc>>,
}

fn main() {}
