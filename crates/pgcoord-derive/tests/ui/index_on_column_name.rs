use pgcoord::readmodels::{ReadModel, ReadModelMeta};

#[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
#[read_model(index(nick_name))]
struct Order {
    #[serde(flatten)]
    meta: ReadModelMeta,
    #[column(rename = "nick_name")]
    nick: String,
}

fn main() {}
