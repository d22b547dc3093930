//! Read-model scenarios: the repository's `get`, `save`,
//! `save_many` of 100 and `find` on PostgreSQL and SQLite, each next to the
//! same statement prepared once and run directly (tokio-postgres on one
//! connection; rusqlite on one connection, on the calling thread), plus
//! projection catch-up speed next to the same reads, writes and checkpoint
//! update in plain SQL. Sequential, one process.
//!
//! ```text
//! cargo run --release -p pgcoord-bench -- --readmodels [--quick] [--rounds N] [--seconds S] [--catch-up-events N]
//! ```
//!
//! Every round runs each repository pair in ten alternating slices (ours,
//! raw, raw, ours, ...; `rate::paired`) so that load elsewhere on the
//! machine hits both alike; the catch-up pairs run back to back (ours, then
//! raw). Ratios are per round, and the report gives their median and range.
//!
//! Layout: `fixture` (the `Order` model and its rows), `rate` (the paired
//! timing loop and a round's results), `postgres` and `sqlite` (one round of the
//! repository pairs on each backend), `catch_up` (projection catch-up
//! speed, and one round of it), `catch_up_raw` (its plain-SQL baselines) and `run` (the rounds and the printed table), which uses all the
//! others; no file imports `run` or this one.

mod catch_up;
mod catch_up_raw;
mod fixture;
mod postgres;
mod rate;
mod run;
mod sqlite;

pub use run::run;
