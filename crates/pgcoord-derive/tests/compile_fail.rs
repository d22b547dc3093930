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

/// The defaults the derive accepts: each literal kind where the column can
/// hold it (`ui/default_*.rs` are the refused ones).
mod fitting_defaults {
    use pgcoord::readmodels::{DefaultValue, ReadModel, ReadModelMeta};

    #[derive(Clone, serde::Serialize, serde::Deserialize, ReadModel)]
    pub struct Defaults {
        #[serde(flatten)]
        pub meta: ReadModelMeta,
        #[column(default = "open")]
        pub status: String,
        #[column(default = 3)]
        pub quantity: Option<i32>,
        #[column(default = 1)]
        pub ratio: f64,
        #[column(default = 2.5)]
        pub weight: f32,
        #[column(default = true)]
        pub active: bool,
        #[column(kind = "decimal", default = "9.99")]
        pub price: String,
        #[column(default = "2024-01-01")]
        pub since: chrono::NaiveDate,
        #[column(default = 255)]
        pub small: u8,
        #[column(default = -128)]
        pub tiny: i8,
    }

    #[test]
    fn fitting_defaults_compile() {
        let defaults: Vec<Option<DefaultValue>> =
            Defaults::fields().into_iter().map(|f| f.default).collect();
        assert_eq!(
            defaults,
            vec![
                Some(DefaultValue::Text("open".into())),
                Some(DefaultValue::Integer(3)),
                Some(DefaultValue::Integer(1)),
                Some(DefaultValue::Float(2.5)),
                Some(DefaultValue::Bool(true)),
                Some(DefaultValue::Text("9.99".into())),
                Some(DefaultValue::Text("2024-01-01".into())),
                Some(DefaultValue::Integer(255)),
                Some(DefaultValue::Integer(-128)),
            ]
        );
    }
}
