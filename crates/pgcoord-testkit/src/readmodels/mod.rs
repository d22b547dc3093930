//! The read-model conformance suite: holds any [`ReadModelRepository`] to
//! the behaviour the port documents.
//!
//! One macro call generates one `#[tokio::test]` per case, each on a fresh
//! backend from the factory. With `database:`, the factory returns a
//! database (anything with `create_schema::<M>()` and `repository::<M>()`:
//! `SqliteDatabase`, `PostgresDatabase`, `adapters::sql::Database`) and the
//! suite creates the `conformance_items` table on it; with `repository:` it
//! returns a ready repository. The second value of the pair is kept alive
//! until the case ends (e.g. the case's own test database).
//!
//! ```no_run
//! use pgcoord::readmodels::InMemoryReadModelRepository;
//! use pgcoord_testkit::readmodels::ConformanceItem;
//!
//! pgcoord_testkit::readmodel_conformance_tests!(repository: || async {
//!     (InMemoryReadModelRepository::<ConformanceItem>::new(), ())
//! });
//! ```
//!
//! [`run_conformance`] runs every case in one call, for a repository that
//! cannot be made per case (e.g. inside one caller's transaction; there,
//! leave out the [`STATEMENT_ERROR_CASES`] with [`run_cases`]: a refused
//! statement aborts a PostgreSQL transaction):
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use pgcoord::readmodels::InMemoryReadModelRepository;
//! use pgcoord_testkit::readmodels::{run_conformance, ConformanceItem};
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

/// Generates one `#[tokio::test]` per conformance case; see the module docs.
#[macro_export]
macro_rules! readmodel_conformance_tests {
    (database: $make:expr) => {
        $crate::__readmodel_case_list!($crate::__readmodel_database_case; $make);
    };
    (repository: $make:expr) => {
        $crate::__readmodel_case_list!($crate::__readmodel_repository_case; $make);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __readmodel_database_case {
    ($make:expr; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let (db, _keep) = ($make)().await;
            db.create_schema::<$crate::readmodels::ConformanceItem>()
                .await
                .expect("create the conformance_items table");
            let repo = db.repository::<$crate::readmodels::ConformanceItem>();
            $crate::readmodels::run_one(stringify!($case), &repo).await;
        }
    )*};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __readmodel_repository_case {
    ($make:expr; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let (repo, _keep) = ($make)().await;
            $crate::readmodels::run_one(stringify!($case), &repo).await;
        }
    )*};
}

/// The case names, once: `$callback!($($args)*; name, name, ...)`.
#[doc(hidden)]
#[macro_export]
macro_rules! __readmodel_case_list {
    ($($callback:ident)::+ $(; $($args:tt)*)?) => {
        $($callback)::+! { $($($args)*;)? save_then_get_round_trips,
                insert_stamps_updated_at,
                get_missing_is_none,
                insert_keeps_the_given_version,
                update_bumps_version_and_keeps_identity,
                get_many_keeps_order_and_skips_missing,
                save_many_stores_every_model,
                save_many_applies_repeated_ids_in_order,
                invalid_models_are_rejected_before_writing,
                years_outside_0000_to_9999_are_rejected_before_writing,
                nan_is_rejected_and_negative_zero_reads_back_as_zero,
                delete_removes_the_row,
                delete_of_missing_row_is_false,
                soft_delete_hides_the_row,
                soft_delete_twice_changes_nothing,
                restore_brings_the_row_back,
                get_deleted_and_find_deleted_see_only_deleted_rows,
                include_deleted_shows_deleted_rows,
                exists_sees_live_rows_only,
                filter_eq,
                filter_ne_matches_nulls,
                filter_gt_and_gte,
                filter_lt_and_lte,
                filter_in,
                filter_not_in_matches_nulls,
                null_never_matches_eq_in_or_comparisons,
                empty_in_matches_nothing,
                empty_not_in_matches_everything,
                filters_combine_with_and,
                bool_and_date_filters,
                uuid_filters,
                timestamp_filters,
                decimal_filters_compare_numerically,
                decimal_filters_compare_exactly_beyond_double_precision,
                unknown_field_is_an_error,
                unknown_order_field_is_an_error,
                unknown_operator_is_an_error,
                mistyped_operand_is_an_error,
                order_ascending_puts_nulls_last,
                order_descending_puts_nulls_first,
                text_orders_byte_wise,
                order_with_limit,
                offset_skips_rows,
                find_one_keeps_order_offset_and_include_deleted,
                count_with_and_without_filters,
                truncate_counts_every_row,
                version_check_succeeds_on_current_version,
                version_check_rejects_stale_version,
                version_check_on_absent_row_is_not_found,
                reads_and_writes_do_not_alias,
                json_round_trips_and_is_not_filterable,
                unique_indexes_reject_duplicate_keys, }
    };
}

/// Runs the case `name` against `repo` (after a truncate), panicking with
/// the reason when it fails. For the test macro.
#[doc(hidden)]
pub async fn run_one<R: ReadModelRepository<ConformanceItem>>(name: &str, repo: &R) {
    repo.truncate().await.expect("truncate before the case");
    if let Err(why) = cases::run_case(name, repo).await {
        panic!("read-model conformance case {name} failed: {why}");
    }
}

use std::fmt;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use pgcoord::readmodels::{ReadModel, ReadModelMeta, ReadModelRepository};

pub use cases::CASES;

/// The cases that make the database refuse a statement (a unique index's
/// duplicate key). Inside a caller's PostgreSQL transaction the first such
/// refusal aborts the transaction, and every later statement fails: run
/// the other cases there, with [`run_cases`].
pub const STATEMENT_ERROR_CASES: &[&str] = &["unique_indexes_reject_duplicate_keys"];

/// The model the suite stores: one field of each queryable type, most of
/// them nullable. Table `conformance_items`, with an index on
/// `(category, quantity)` and a unique one on `(category, code)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ReadModel)]
#[read_model(index(category, quantity), unique_index(category, code))]
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
    /// Text, nullable; unique together with `category` (index
    /// `idx_conformance_items_category_code_{hash}`).
    pub code: Option<String>,
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
            code: None,
        }
    }

    /// Sets the code.
    pub fn code(mut self, c: impl Into<String>) -> Self {
        self.code = Some(c.into());
        self
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
    run_cases(repo, CASES).await
}

/// Runs the cases `names` (from [`CASES`]) against `repo`, each after a
/// truncate, and reports which passed; an unknown name fails.
pub async fn run_cases<R>(repo: &R, names: &[&'static str]) -> ConformanceReport
where
    R: ReadModelRepository<ConformanceItem>,
{
    let mut report = ConformanceReport::default();
    for &name in names {
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
