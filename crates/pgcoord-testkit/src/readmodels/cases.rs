//! The conformance cases. Each starts on an empty table and returns
//! `Err(why)` on the first broken expectation. This file keeps the case
//! list's dispatch and the helpers the cases share; the cases themselves are
//! in `cases/`, one file per topic.

use super::ConformanceItem as Item;
use pgcoord::{
    error::ReadModelError,
    readmodels::{Query, ReadModelRepository},
};
use pgcoord::{Error, Result};

type Outcome = std::result::Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

macro_rules! ensure_eq {
    ($left:expr, $right:expr $(,)?) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!(
                "{} == {} failed:\n   left: {:?}\n  right: {:?}",
                stringify!($left),
                stringify!($right),
                l,
                r
            ));
        }
    }};
}

trait Ctx<T> {
    fn ctx(self, what: &str) -> std::result::Result<T, String>;
}

impl<T> Ctx<T> for Result<T> {
    fn ctx(self, what: &str) -> std::result::Result<T, String> {
        self.map_err(|e| format!("{what}: unexpected error: {e}"))
    }
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        /// The names of every conformance case, in run order.
        pub const CASES: &[&str] = &[$(stringify!($name)),*];

        pub(super) async fn run_case<R>(name: &str, repo: &R) -> Outcome
        where
            R: ReadModelRepository<Item>,
        {
            match name {
                $(stringify!($name) => $name(repo).await,)*
                _ => Err(format!("unknown case {name}")),
            }
        }
    };
}

crate::__readmodel_case_list!(suite);

async fn seed<R: ReadModelRepository<Item>>(
    repo: &R,
    items: Vec<Item>,
) -> std::result::Result<Vec<Item>, String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(repo.save(&item).await.ctx("seeding")?);
    }
    Ok(out)
}

/// Five items: a(q1, cat x, price 1.5), b(q2, cat y), c(q3, no cat, price 3.5),
/// d(q4, cat x), e(q5, no cat, price 0.5).
async fn seed_five<R: ReadModelRepository<Item>>(
    repo: &R,
) -> std::result::Result<Vec<Item>, String> {
    seed(
        repo,
        vec![
            Item::new("a").quantity(1).category("x").price(1.5),
            Item::new("b").quantity(2).category("y"),
            Item::new("c").quantity(3).price(3.5),
            Item::new("d").quantity(4).category("x"),
            Item::new("e").quantity(5).price(0.5),
        ],
    )
    .await
}

fn names(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| i.name.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

async fn find_names<R: ReadModelRepository<Item>>(
    repo: &R,
    query: Query,
) -> std::result::Result<Vec<String>, String> {
    Ok(sorted(names(&repo.find(&query).await.ctx("find")?)))
}

fn expect_invalid<T: std::fmt::Debug>(res: Result<T>, what: &str) -> Outcome {
    match res {
        Err(Error::ReadModel(ReadModelError::InvalidQuery(_))) => Ok(()),
        other => Err(format!("{what}: expected InvalidQuery, got {other:?}")),
    }
}

mod bounds;
mod deletion;
mod filters;
mod ordering;
mod query_errors;
mod unique;
mod versions;
mod writes;

use self::bounds::*;
use self::deletion::*;
use self::filters::*;
use self::ordering::*;
use self::query_errors::*;
use self::unique::*;
use self::versions::*;
use self::writes::*;
