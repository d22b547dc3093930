//! The read-model conformance suite: one call holds any
//! [`ReadModelRepository`] to the behaviour the port documents.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use eventsource::adapters::memory::InMemoryReadModelRepository;
//! use eventsource_testkit::readmodels::{run_conformance, ConformanceItem};
//!
//! let repo = InMemoryReadModelRepository::<ConformanceItem>::new();
//! let report = run_conformance(&repo).await;
//! report.assert_passed();
//! assert!(report.passed.len() >= 28);
//! # });
//! ```
//!
//! The suite works on [`ConformanceItem`] (table `conformance_items`); a SQL
//! backend must have that table (create it from
//! `adapters::sql::schema::full_schema::<ConformanceItem>`). Every case
//! starts by truncating the table.

mod cases;

use std::fmt;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use eventsource::ports::readmodels::{ReadModel, ReadModelMeta, ReadModelRepository};

pub use cases::CASES;

/// The model the suite stores: one field of each queryable type, most of
/// them nullable. Table `conformance_items`, with an index on
/// `(category, quantity)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ReadModel)]
#[read_model(index(category, quantity))]
pub struct ConformanceItem {
    /// Bookkeeping.
    #[serde(flatten)]
    #[read_model(meta)]
    pub meta: ReadModelMeta,
    /// Text, not nullable.
    pub name: String,
    /// Text, nullable.
    pub category: Option<String>,
    /// Integer, not nullable.
    pub quantity: i64,
    /// Float, nullable.
    pub price: Option<f64>,
    /// Bool, not nullable.
    pub active: bool,
    /// UUID, nullable.
    pub owner_id: Option<Uuid>,
    /// Timestamp, nullable.
    pub due_at: Option<DateTime<Utc>>,
    /// Date, nullable.
    pub day: Option<NaiveDate>,
    /// JSON, nullable (not queryable).
    pub attributes: Option<serde_json::Value>,
    /// Decimal (as text), nullable.
    #[column(kind = "decimal")]
    pub amount: Option<String>,
}

impl ConformanceItem {
    /// A new item (random id, version 1) with `name`, quantity 0, active,
    /// every nullable field NULL.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            meta: ReadModelMeta::new_random(),
            name: name.into(),
            category: None,
            quantity: 0,
            price: None,
            active: true,
            owner_id: None,
            due_at: None,
            day: None,
            attributes: None,
            amount: None,
        }
    }

    /// Sets the category.
    pub fn category(mut self, c: impl Into<String>) -> Self {
        self.category = Some(c.into());
        self
    }

    /// Sets the quantity.
    pub fn quantity(mut self, q: i64) -> Self {
        self.quantity = q;
        self
    }

    /// Sets the price.
    pub fn price(mut self, p: f64) -> Self {
        self.price = Some(p);
        self
    }
}

/// The outcome of a conformance run.
#[derive(Debug, Default, Clone)]
pub struct ConformanceReport {
    /// The cases that passed.
    pub passed: Vec<&'static str>,
    /// The cases that failed, with why.
    pub failed: Vec<(&'static str, String)>,
}

impl ConformanceReport {
    /// Panics, listing every failed case, unless all passed.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(
            self.failed.is_empty() && !self.passed.is_empty(),
            "{} of {} read-model conformance cases failed:\n{self}",
            self.failed.len(),
            self.failed.len() + self.passed.len()
        );
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, why) in &self.failed {
            writeln!(f, "  FAILED {name}: {why}")?;
        }
        write!(
            f,
            "  {} passed, {} failed",
            self.passed.len(),
            self.failed.len()
        )
    }
}

/// Runs every case of [`CASES`] against `repo`, each after a truncate, and
/// reports which passed.
pub async fn run_conformance<R>(repo: &R) -> ConformanceReport
where
    R: ReadModelRepository<ConformanceItem>,
{
    let mut report = ConformanceReport::default();
    for &name in CASES {
        let outcome = match repo.truncate().await {
            Ok(_) => cases::run_case(name, repo).await,
            Err(e) => Err(format!("truncate before the case failed: {e}")),
        };
        match outcome {
            Ok(()) => report.passed.push(name),
            Err(why) => report.failed.push((name, why)),
        }
    }
    report
}
