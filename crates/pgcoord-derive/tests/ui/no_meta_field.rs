use pgcoord::readmodels::ReadModel;

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
struct Order {
    customer: String,
}

fn main() {}
