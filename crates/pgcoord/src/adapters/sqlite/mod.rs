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
//! - it is synchronous and tied to no async runtime: on a multi-thread
//!   runtime the adapter runs each call on the caller's thread inside
//!   [`tokio::task::block_in_place`], which hands that worker's other tasks
//!   to another thread first, so file I/O and SQLite's lock waits never
//!   hold them up (a projection's transaction runs in one such section);
//!   on a current-thread runtime, where that is impossible, calls go to a
//!   thread of the database's own over a channel, at the cost of two
//!   thread wake-ups per call;
//! - the alternative, `sqlx`, would bring a second PostgreSQL driver and a
//!   second connection pool into a workspace that already standardises on
//!   `tokio-postgres`.
//!
//! # Connections
//!
//! A [`SqliteDatabase`] is one connection, shared by every repository made
//! from it, kept by its own thread (which runs queued calls first in, first
//! out, and closes the connection at the end; a call run on the caller's
//! thread waits for the queue first) and guarded by an async gate while a
//! transaction is open (SQLite serialises writers anyway). An in-memory database is, by necessity, exactly one shared
//! connection: a second connection would see a different, empty database.
//! Each connection is opened with `foreign_keys=ON`, `busy_timeout=5000`
//! and, for files, `journal_mode=WAL`.

mod connection;
mod database;
mod error;
mod projection;
mod readmodels;
mod timestamp;
mod transaction;
mod worker;

pub use database::SqliteDatabase;
pub use readmodels::SqliteReadModelRepository;
pub use transaction::SqliteTransaction;
