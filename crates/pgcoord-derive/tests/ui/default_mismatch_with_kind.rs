use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize)]
enum Priority {
    Low,
    High,
}

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Ticket {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: ReadModelMeta,
    // Stored through its serde form as text: the default must be a string.
    #[column(kind = "text", default = true)]
    priority: Priority,
}

fn main() {}
