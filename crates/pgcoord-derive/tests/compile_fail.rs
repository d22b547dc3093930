//! Misuse of `#[derive(ReadModel)]` is a compile error with a clear
//! message; each case's expected message is its `.stderr` file. Beside
//! them, one derive that names the crate through a re-export compiles and
//! runs (an ordinary test: it needs no compiler output to compare).

#[test]
fn misuse_is_a_compile_error() {
    // Only failing cases: trybuild checks them (and their dependencies)
    // without building any.
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

/// `#[read_model(crate = "...")]`: the generated code names the crate
/// through the given path, here a re-export as a renamed dependency or a
/// facade crate would give it (`ui/wrong_crate_path.rs` shows the path is
/// not ignored).
mod facade {
    pub use ::pgcoord::*;
}

mod through_a_facade {
    use crate::facade::readmodels::{ReadModel, ReadModelMeta};

    #[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
    #[read_model(crate = "crate::facade", table = "orders", index(status))]
    pub struct Order {
        #[serde(flatten)]
        #[read_model(meta)]
        pub meta: ReadModelMeta,
        pub status: String,
        pub total: Option<i64>,
    }
}

#[test]
fn the_crate_path_is_used_for_the_generated_code() {
    use facade::readmodels::ReadModel;
    use through_a_facade::Order;
    assert_eq!(Order::TABLE_NAME, Some("orders"));
    assert_eq!(Order::fields().len(), 2);
    assert_eq!(Order::STATUS.name(), "status");
}
