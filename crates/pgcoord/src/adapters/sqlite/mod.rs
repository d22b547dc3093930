//! SQLite adapters (feature `sqlite`): [`SqliteDatabase`] and
//! [`SqliteReadModelRepository`].
//!
//! # Why rusqlite
//!
//! The adapter is built on [`rusqlite`] with its `bundled` feature:
//!
//! - the bundled build compiles a known, recent SQLite (with `RETURNING`,
//!   upserts and `NULLS LAST`) into the binary, so behaviour does not depend
//!   on the system library;
//! - it is the most used and most mature SQLite binding for Rust;
//! - it is synchronous and tied to no async runtime: the adapter runs every
//!   call on a thread that owns the connection, one per database, reached
//!   over a channel, which keeps file I/O and SQLite's lock waits off the
//!   runtime's workers at the cost of one cross-thread wake-up per call;
//! - the alternative, `sqlx`, would bring a second PostgreSQL driver and a
//!   second connection pool into a workspace that already standardises on
//!   `tokio-postgres`.
//!
//! # Connections
//!
//! A [`SqliteDatabase`] is one connection, shared by every repository made
//! from it, owned by its own thread (which runs calls first in, first out)
//! and guarded by an async gate while a transaction is open (SQLite
//! serialises writers anyway). An in-memory database is, by necessity, exactly one shared
//! connection: a second connection would see a different, empty database.
//! Each connection is opened with `foreign_keys=ON`, `busy_timeout=5000`
//! and, for files, `journal_mode=WAL`.

mod connection;
mod database;
mod error;
mod projection;
mod readmodels;
mod worker;

pub use database::{SqliteDatabase, SqliteTransaction};
pub use readmodels::SqliteReadModelRepository;
