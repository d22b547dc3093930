use pgcoord::readmodels::ReadModel;

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    #[serde(flatten)]
    #[read_model(meta)]
    meta: String,
    name: String,
}

fn main() {}
